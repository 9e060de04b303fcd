package settle

import (
	"context"
	"fmt"
	"iter"

	"github.com/cutline/cutline"
)

// PageLimits bounds a Page. A zero bound is no bound; a page holds one
// extent at least, however large, since an extent is never split.
type PageLimits struct {
	// MaxRecords bounds the records of a page: the sum of its extents'
	// Count.
	MaxRecords uint64
	// MaxBytes bounds the sum of the page's extents' Cost.
	MaxBytes int64
	// Cost is what one extent costs against MaxBytes, at least 0: what
	// serving it takes (its bytes in a host's answer, say). Nil: its
	// bytes, End−Start.
	Cost func(Extent) int64
}

// Page is a bounded stretch of a stream, planned from the index alone:
// the extents a read serves, and where the next read starts. A host that
// answers a read in pages says Continue and Next before it has read a
// byte, then streams the chunks (StreamReader.ReadPage).
type Page struct {
	Stream  string
	Extents []Extent
	// Next is the stream's first offset not covered, as read when the
	// page was planned (0 for a stream never covered).
	Next uint64
	// Continue is the offset the next page starts at: the end of the
	// page's last extent, or the offset asked for when the page is empty
	// (at or past Next).
	Continue uint64
}

// Page plans the page of stream that starts at the extent holding from:
// extents in offset order, up to the first that would take the page past
// a bound of lim (the first extent always fits), or to the end of the
// coverage. At or past the coverage the page is empty; below the
// retention point it fails with a *TrimmedError. A negative bound is a
// *cutline.ConfigError, and so is a Cost below 0.
func (x *RefIndex) Page(ctx context.Context, stream string, from uint64, lim PageLimits) (Page, error) {
	if lim.MaxBytes < 0 {
		return Page{}, &cutline.ConfigError{Field: "MaxBytes", Value: lim.MaxBytes, Reason: "must be at least 0 (0 means no bound)"}
	}
	cost := lim.Cost
	if cost == nil {
		cost = func(e Extent) int64 { return int64(e.End - e.Start) }
	}
	next, err := x.Next(ctx, stream)
	p := Page{Stream: stream, Next: next, Continue: from}
	if err != nil || from >= next {
		return p, err
	}
	var records uint64
	var bytes int64
	for e, err := range x.Extents(ctx, stream, from) {
		if err != nil {
			return Page{}, err
		}
		c := cost(e)
		if c < 0 {
			return Page{}, &cutline.ConfigError{Field: "Cost", Value: c, Reason: fmt.Sprintf("the cost of %s/%d must be at least 0", stream, e.Offset)}
		}
		over := lim.MaxRecords > 0 && records+e.Count > lim.MaxRecords || lim.MaxBytes > 0 && bytes+c > lim.MaxBytes
		if len(p.Extents) > 0 && over {
			break
		}
		records, bytes = records+e.Count, bytes+c
		p.Extents = append(p.Extents, e)
		p.Continue = e.Offset + e.Count
		if p.Continue >= next {
			break
		}
	}
	return p, nil
}

// ReadPage yields the chunks of p's extents in order, read as Read reads
// them. Iteration ends after the first error; a record that retention
// dropped since p was planned is a *TrimmedError.
func (r *StreamReader) ReadPage(ctx context.Context, p Page) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		var ahead segmentBuffer
		for _, e := range p.Extents {
			c, err := r.chunk(ctx, &ahead, p.Stream, e)
			if !yield(c, err) || err != nil {
				return
			}
		}
	}
}

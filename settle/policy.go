package settle

import (
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
)

// Policy is a stream's retention: how much of it the index keeps. A zero
// field sets no limit; the zero Policy keeps everything. When several
// limits are set, the one that keeps the least wins.
type Policy struct {
	// MaxAge drops the records that joined the index more than MaxAge
	// ago, on the index's clock (RefIndex.WithClock), a whole page at a
	// time: a page goes once its newest span is older than MaxAge. Pages
	// written without a clock carry no time and are never old enough:
	// pages are dropped in offset order, so the first page without a time
	// stops retention by age.
	MaxAge time.Duration
	// MaxBytes keeps at most this many bytes of the stream's payload, a
	// whole span at a time: the newest spans whose bytes add up to at
	// most MaxBytes stay.
	MaxBytes int64
	// MaxRecords keeps at most this many offsets: the stream starts at
	// Next−MaxRecords at the latest.
	MaxRecords uint64
}

func (p Policy) validate() error {
	switch {
	case p.MaxAge < 0:
		return &cutline.ConfigError{Field: "MaxAge", Value: p.MaxAge, Reason: "must not be negative (0: no limit)"}
	case p.MaxBytes < 0:
		return &cutline.ConfigError{Field: "MaxBytes", Value: p.MaxBytes, Reason: "must not be negative (0: no limit)"}
	}
	return nil
}

// Retention limits, as RetainReport.By names them.
const (
	ByAge     = "age"
	ByBytes   = "bytes"
	ByRecords = "records"
)

// RetainPolicy moves stream's retention point as far as policy allows and
// deletes what lies below it (Retain). The point is computed from what the
// index knows: the pages' times (MaxAge), the spans' byte ranges
// (MaxBytes) and the stream's coverage (MaxRecords). It never moves the
// point down, and never past the stream's coverage. A MaxAge on an index
// without a clock is a *cutline.ConfigError, since no page would carry a time.
// It costs a list of the stream's pages, and then what Retain costs.
//
// The flights and segments below the point are not deleted here: trim
// flights below Needed (Settler.TrimUnneeded), and let the Compactor's
// Collect delete segments no page names.
func (x *RefIndex) RetainPolicy(ctx context.Context, stream string, policy Policy) (RetainReport, error) {
	rep := RetainReport{Stream: stream}
	if err := epoch.ValidateName("stream", stream); err != nil {
		return rep, err
	}
	if err := policy.validate(); err != nil {
		return rep, err
	}
	if policy.MaxAge > 0 && x.clock == nil {
		return rep, &cutline.ConfigError{Field: "MaxAge", Value: policy.MaxAge, Reason: "the index has no clock (RefIndex.WithClock), so its pages carry no time"}
	}
	point, by, err := x.policyPoint(ctx, stream, policy)
	if err != nil {
		return rep, err
	}
	rep, err = x.Retain(ctx, stream, point)
	if rep.Start == point && point > 0 {
		rep.By = by
	}
	return rep, err
}

// policyPoint computes the retention point policy asks of stream, and
// which limit set it ("" when none moves it past the current point).
func (x *RefIndex) policyPoint(ctx context.Context, stream string, policy Policy) (uint64, string, error) {
	start, _, err := x.start(ctx, stream)
	if err != nil {
		return 0, "", err
	}
	kvs, _, err := x.store.List(ctx, x.pagePrefix(stream))
	if err != nil {
		return 0, "", fmt.Errorf("settle retention policy of %s: %w", stream, err)
	}
	if len(kvs) == 0 {
		return start, "", x.checkFormat(ctx, stream)
	}
	pages := make([]refPage, len(kvs))
	var end uint64
	for i, kv := range kvs {
		if pages[i], err = x.decodePage(kv, stream); err != nil {
			return 0, "", err
		}
		if err := pagesTile(kv.Key, pages[i], i, len(kvs), &end); err != nil {
			return 0, "", err
		}
	}
	point, by := start, ""
	raise := func(p uint64, rule string) {
		if p > point {
			point, by = p, rule
		}
	}
	next := pages[len(pages)-1].Next
	if policy.MaxRecords > 0 && next > policy.MaxRecords {
		raise(next-policy.MaxRecords, ByRecords)
	}
	if policy.MaxAge > 0 {
		cutoff := x.clock.Now().Add(-policy.MaxAge).UnixNano()
		for _, pg := range pages {
			if pg.Time == 0 || pg.Time >= cutoff {
				break
			}
			raise(pg.Next, ByAge)
		}
	}
	if policy.MaxBytes > 0 {
		// Walk back from the newest span: the point is the first offset
		// of the oldest span that still fits.
		kept := int64(0)
		at := next
	walk:
		for i := len(pages) - 1; i >= 0; i-- {
			refs := pages[i].refs()
			for j := len(refs) - 1; j >= 0; j-- {
				r := refs[j]
				if r.Offset+r.Count <= point {
					break walk
				}
				if kept+int64(r.End-r.Start) > policy.MaxBytes {
					break walk
				}
				kept += int64(r.End - r.Start)
				at = r.Offset
			}
		}
		raise(at, ByBytes)
	}
	return point, by, nil
}

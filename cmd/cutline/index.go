package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cutline/cutline/settle"
)

// errNoPayloads is the locator of the tool's index: migration and lookups
// read refs, never a flight's payload.
var errNoPayloads = errors.New("cutline: the index tool reads no payloads")

func (c *cmd) refIndex(ctx context.Context) (*settle.RefIndex, error) {
	st, err := c.store(ctx)
	if err != nil {
		return nil, err
	}
	return settle.NewRefIndex(st, c.g.root, func([]byte) ([]settle.Span, error) { return nil, errNoPayloads })
}

// MigrateView is the output of `index-migrate`.
type MigrateView struct {
	Streams []settle.MigrateReport `json:"streams"`
}

// runIndexMigrate rewrites every stream indexed in the previous release's
// format (a key per span) into pages. Every star must be stopped: a star
// writing a stream meanwhile would find neither format complete.
func runIndexMigrate(ctx context.Context, c *cmd, args []string) error {
	if _, err := c.parse(c.flags("index-migrate"), args); err != nil {
		return err
	}
	x, err := c.refIndex(ctx)
	if err != nil {
		return err
	}
	if err := c.confirm("rewrite every stream's refs from one key per span into pages, then delete the old keys; stop every star first"); err != nil {
		return err
	}
	var v MigrateView
	for rep, err := range x.MigrateAll(ctx) {
		if err != nil {
			return fmt.Errorf("index migrate: %w (%d streams migrated before it; run it again to finish)", err, len(v.Streams))
		}
		v.Streams = append(v.Streams, rep)
	}
	return c.emit(v, func(w io.Writer) {
		if len(v.Streams) == 0 {
			fmt.Fprintln(w, "nothing to migrate: no stream is indexed in the old format")
			return
		}
		for _, r := range v.Streams {
			fmt.Fprintf(w, "%s\t%d refs into %d pages\n", r.Stream, r.Refs, r.Pages)
		}
	})
}

// FindView is the output of `index-find`.
type FindView struct {
	Stream string     `json:"stream"`
	Offset uint64     `json:"offset"`
	Start  uint64     `json:"start"`
	Next   uint64     `json:"next"`
	Ref    settle.Ref `json:"ref"`
}

// runIndexFind shows where a stream's offset lies: the star, epoch, slot
// and bytes of the flight that holds it.
func runIndexFind(ctx context.Context, c *cmd, args []string) error {
	pos, err := c.parse(c.flags("index-find"), args, "<stream>", "<offset>")
	if err != nil {
		return err
	}
	id, err := parseName("stream", pos[0])
	if err != nil {
		return err
	}
	off, err := parseUint("offset", pos[1])
	if err != nil {
		return err
	}
	x, err := c.refIndex(ctx)
	if err != nil {
		return err
	}
	v := FindView{Stream: id, Offset: off}
	if v.Start, err = x.Start(ctx, id); err != nil {
		return err
	}
	if v.Next, err = x.Next(ctx, id); err != nil {
		return err
	}
	if v.Ref, err = x.Find(ctx, id, off); err != nil {
		return fmt.Errorf("stream %s offset %d (retained from %d, covered up to %d): %w", id, off, v.Start, v.Next, err)
	}
	return c.emit(v, func(w io.Writer) {
		r := v.Ref
		fmt.Fprintf(w, "stream\t%s, retained from %d, covered up to %d\n", id, v.Start, v.Next)
		fmt.Fprintf(w, "offset %d\tin offsets [%d, %d) at %s/%d slot %d, bytes [%d, %d)\n", off, r.Offset, r.Offset+r.Count, r.Star, r.Epoch, r.Slot, r.Start, r.End)
	})
}

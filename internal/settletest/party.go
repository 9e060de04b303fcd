package settletest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/settle"
)

// Party is one process's view of the storage, with its own minter, fencer,
// index and settler. With a kill switch, every request passes through it.
type Party struct {
	Env     *Env
	Kill    *KillSwitch
	Store   metastore.Store
	Buckets []objstore.Bucket
	Zones   chain.Zones
	Minter  *epoch.Minter
	Fencer  *fence.Fencer
	Refs    *settle.RefIndex
	Settler *settle.Settler
}

// PartyOptions configure a party. The zero value is a party with a fencer
// and default options, whose requests go straight to the Env's zones.
type PartyOptions struct {
	// Kill, if set, crashes the party at its kill switch's request.
	Kill *KillSwitch
	// NoFencer leaves the settler without a fencer.
	NoFencer bool
	// Settle and Fence are the settler's and the fencer's options; the
	// party sets the fencer and the identity.
	Settle settle.Options
	Fence  fence.Options
	// Wrap, if set, wraps zone i's bucket in what the party sees.
	Wrap func(i int, b objstore.Bucket) objstore.Bucket
}

// NewParty makes a party; name is its minter and fencer identity.
func (e *Env) NewParty(name string, o PartyOptions) *Party {
	t := e.T
	t.Helper()
	p := &Party{Env: e, Kill: o.Kill, Store: e.Store}
	if o.Kill != nil {
		p.Store = o.Kill.Store(e.Store)
	}
	for i, z := range e.Zones {
		var b objstore.Bucket = z
		if o.Wrap != nil {
			b = o.Wrap(i, b)
		}
		if o.Kill != nil {
			b = o.Kill.Bucket(b)
		}
		p.Buckets = append(p.Buckets, b)
	}
	p.Zones = chain.MustZones(p.Buckets...)
	var err error
	p.Minter, err = epoch.NewMinter(p.Store, epoch.Options{Identity: name})
	require.NoError(t, err)
	fo := o.Fence
	fo.Identity = name
	p.Fencer, err = fence.New(p.Minter, p.Zones, fo)
	require.NoError(t, err)
	p.Refs, err = settle.NewRefIndex(p.Store, "", cutlinetest.Locate)
	require.NoError(t, err)
	so := o.Settle
	if !o.NoFencer {
		so.Fencer = p.Fencer
	}
	p.Settler, err = settle.New(p.Minter, p.Zones, p.Refs, so)
	require.NoError(t, err)
	return p
}

// Harness is the party as cutlinetest's host and checker see it.
func (p *Party) Harness(name string) *cutlinetest.Party {
	return &cutlinetest.Party{Name: name, Env: p.Env.Env, Zones: p.Zones, Minter: p.Minter, Fencer: p.Fencer,
		Refs: p.Refs, Settler: p.Settler, Reader: p.Reader()}
}

// HarnessOn is the party as cutlinetest's checker sees it, failing t.
func (p *Party) HarnessOn(t testing.TB) *cutlinetest.Party {
	h := p.Harness("checker")
	h.Env = p.Env.On(t)
	return h
}

// Reader makes a reader over the party's zones.
func (p *Party) Reader() *chain.Reader {
	r, err := chain.NewReader(p.Minter, p.Zones, chain.ReaderOptions{})
	require.NoError(p.Env.T, err)
	return r
}

// Writer makes a writer for rec over the party's buckets; it is aborted at
// the end of the test unless the test ended it.
func (p *Party) Writer(rec *epoch.Record, opts chain.WriterOptions) *chain.Writer {
	bs, err := p.Zones.Resolve(rec.Constants.Buckets)
	require.NoError(p.Env.T, err)
	w, err := chain.NewWriter(rec, chain.MustZones(bs...), opts)
	require.NoError(p.Env.T, err)
	p.Env.T.Cleanup(w.Abort)
	return w
}

// Mint mints an epoch of star through the party's minter; an error fails
// the Env's test.
func (p *Party) Mint(ctx context.Context, star string, c epoch.Constants) *epoch.Record {
	p.Env.T.Helper()
	rec, err := p.Minter.Mint(ctx, star, c)
	require.NoError(p.Env.T, err)
	return rec
}

package benchfix

import (
	"fmt"
	"time"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/memblob"
)

// Requests counts object requests by kind. Reads are Gets and GetRanges.
type Requests struct {
	Reads   int `json:"reads"`
	Creates int `json:"creates"`
	Deletes int `json:"deletes"`
	Lists   int `json:"lists"`
}

// Total is the number of requests of every kind.
func (r Requests) Total() int { return r.Reads + r.Creates + r.Deletes + r.Lists }

// Add returns the sum of r and o.
func (r Requests) Add(o Requests) Requests {
	return Requests{r.Reads + o.Reads, r.Creates + o.Creates, r.Deletes + o.Deletes, r.Lists + o.Lists}
}

// Div returns r with every count divided by n (rounded down): the mean
// of n operations whose sum r is. n must be positive.
func (r Requests) Div(n int) Requests {
	return Requests{r.Reads / n, r.Creates / n, r.Deletes / n, r.Lists / n}
}

func (r Requests) String() string {
	return fmt.Sprintf("%d reads, %d creates, %d deletes, %d lists", r.Reads, r.Creates, r.Deletes, r.Lists)
}

// Zones returns one in-memory bucket per name (raw, for laying out data
// without being counted), the fault wrappers over them that count the
// requests made through them (counted), and the views the parties under
// measurement use (slow): the counted buckets behind a fixed latency of
// lat per request, or the counted buckets themselves when lat is 0.
func Zones(lat time.Duration, names ...string) (raw []objstore.Bucket, counted []*fault.Bucket, slow []objstore.Bucket) {
	for _, name := range names {
		m := memblob.New(name)
		f := fault.Wrap(m, fault.Options{})
		raw = append(raw, m)
		counted = append(counted, f)
		slow = append(slow, Slow(f, lat))
	}
	return raw, counted, slow
}

// Slow returns b behind a fixed latency of lat per request, or b itself
// when lat is 0.
func Slow(b objstore.Bucket, lat time.Duration) objstore.Bucket {
	if lat <= 0 {
		return b
	}
	return latency.Wrap(b, latency.Options{Default: latency.Fixed(lat)})
}

// Count returns the requests the zones received since they were made or
// last Reset.
func Count(zones []*fault.Bucket) Requests {
	var c Requests
	for _, z := range zones {
		s := z.Stats()
		c.Reads += s.Calls[fault.OpGet] + s.Calls[fault.OpGetRange]
		c.Creates += s.Calls[fault.OpCreate]
		c.Deletes += s.Calls[fault.OpDelete]
		c.Lists += s.Calls[fault.OpList]
	}
	return c
}

// Reset zeroes the zones' counts.
func Reset(zones []*fault.Bucket) {
	for _, z := range zones {
		z.ResetStats()
	}
}

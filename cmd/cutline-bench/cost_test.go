package main

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/benchfix"
)

// TestCostModel prices hand-made counts: 2.5 creates per append (priced
// at K=3 and as measured), a takeover of 100 reads, 10 creates, 2 lists
// and 50 deletes, and one create per minute of idleness.
func TestCostModel(t *testing.T) {
	cfg := config{costAppends: 1000, idle: time.Minute}
	rows := []Row{
		Row{ID: "cost.append"}.objects(benchfix.Requests{Creates: 2500}),
		Row{ID: "takeover.requests"}.objects(benchfix.Requests{Reads: 100, Creates: 10, Lists: 2, Deletes: 50}),
		Row{ID: "idle.writer"}.objects(benchfix.Requests{Creates: 1}),
		{ID: "appends.mem", Value: 1}, // not priced
	}
	prices := []PriceClass{{Name: "A", Put: 0.005, Get: 0.0004}, {Name: "B", Put: 0.001, Get: 0.0001}}
	c := costModel(rows, cfg, prices)
	if c == nil || len(c.Lines) != 4 {
		t.Fatalf("cost model: %+v", c)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }
	for _, tc := range []struct {
		id       string
		put, get float64
		usd      []float64
	}{
		{"cost.append", 3e6, 0, []float64{15, 3}},
		{"cost.append.measured", 2.5e6, 0, []float64{12.5, 2.5}},
		{"cost.takeover", 12, 100, []float64{12*0.005/1000 + 100*0.0004/1000, 12*0.001/1000 + 100*0.0001/1000}},
		{"cost.idle.writer", 30 * 24 * 60, 0, []float64{30 * 24 * 60 * 0.005 / 1000, 30 * 24 * 60 * 0.001 / 1000}},
	} {
		var l *CostLine
		for i := range c.Lines {
			if c.Lines[i].ID == tc.id {
				l = &c.Lines[i]
			}
		}
		if l == nil {
			t.Errorf("no line %s in %+v", tc.id, c.Lines)
			continue
		}
		if !near(l.Put, tc.put) || !near(l.Get, tc.get) {
			t.Errorf("%s: %v PUT, %v GET; want %v, %v", tc.id, l.Put, l.Get, tc.put, tc.get)
		}
		for i, want := range tc.usd {
			if !near(l.USD[i], want) {
				t.Errorf("%s at %s: $%v, want $%v", tc.id, prices[i].Name, l.USD[i], want)
			}
		}
	}
	var b bytes.Buffer
	c.writeTable(&b)
	for _, want := range []string{"| 1,000,000 appends at K creates per flight (K=3, W=2, 1 KiB) | 3,000,000 | 0 | 15.00 | 3.00 |", "A, USD", "B, USD", "check the current", "not modelled"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("cost table lacks %q:\n%s", want, b.String())
		}
	}
	for v, want := range map[float64]string{0: "0", 15: "15.00", 0.5: "0.5000", 2.436e-05: "0.00002436", 0.000204: "0.0002040"} {
		if got := usdString(v); got != want {
			t.Errorf("usdString(%v) = %q, want %q", v, got, want)
		}
	}
	if costModel([]Row{{ID: "appends.mem"}}, cfg, prices) != nil {
		t.Error("a cost model without any priced row")
	}
}

func TestPriceFlags(t *testing.T) {
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"-price-standard-put", "-1"}, &out, &log)
	if !errors.Is(err, cutline.ErrInvalid) || !strings.Contains(err.Error(), "-price-standard-put") {
		t.Errorf("a negative price: %v", err)
	}
	if err := run(t.Context(), []string{"-price-express-get", "x"}, &out, &log); err == nil {
		t.Error("a price that is no number is refused")
	}
	for _, p := range defaultPrices() {
		if p.Put <= 0 || p.Get <= 0 || p.Put <= p.Get {
			t.Errorf("default prices of %s: %+v", p.Name, p)
		}
	}
}

// TestAuthorityIdle: a holder that heartbeats keeps its grant over a
// simulated minute, and the controller writes nothing meanwhile.
func TestAuthorityIdle(t *testing.T) {
	res, err := measureAuthorityIdle(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !res.admitted || res.heartbeats != 60 {
		t.Errorf("over a minute: %+v, want 60 heartbeats and the grant kept", res)
	}
	t.Logf("authority steady state over a minute: %+v", res)
}

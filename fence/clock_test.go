package fence

import (
	"time"

	"github.com/cutline/cutline/clock"
)

func clockFake() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

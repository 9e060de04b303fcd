package fence

import (
	"crypto/sha256"
	"sync"
)

// Kept holds the payloads of committed flights that a fence read whole
// and verified, for the caller that reads the epoch's flights below the
// cut next, as settlement's coverage does (see Fencer.FenceKeep): a
// payload taken from Kept is a flight not read again. It holds at most
// its budget of object bytes, preferring the largest flights (each saves
// the most), and forgets a payload once taken. It is safe for concurrent
// use; the methods of a nil *Kept do nothing and hold nothing.
type Kept struct {
	mu      sync.Mutex
	budget  int64
	bytes   int64
	flights map[uint64]keptFlight
}

// keptFlight is one kept payload, with the digest of the verified object
// it was read from and that object's size.
type keptFlight struct {
	digest  [sha256.Size]byte
	size    int64
	payload []byte
}

// NewKept returns an empty Kept that holds up to budget bytes of objects.
func NewKept(budget int64) *Kept {
	return &Kept{budget: budget, flights: map[uint64]keptFlight{}}
}

// Take returns and forgets the payload kept for slot: the payload of the
// slot's committed flight, read whole and verified. It belongs to the
// caller.
func (k *Kept) Take(slot uint64) ([]byte, bool) {
	if k == nil {
		return nil, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	f, ok := k.flights[slot]
	if !ok {
		return nil, false
	}
	k.forget(slot)
	return f.payload, true
}

// Len returns how many payloads are held.
func (k *Kept) Len() int {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.flights)
}

// Bytes returns the size of the objects the held payloads were read
// from.
func (k *Kept) Bytes() int64 {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.bytes
}

// Release forgets every payload.
func (k *Kept) Release() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.flights)
	k.bytes = 0
}

// offer keeps the payload of object, the verified copy (digest) of the
// committed flight at slot whose header is headerLen bytes long, if it
// fits the budget, making room by forgetting smaller flights. A slot
// offered again with another digest is forgotten: Kept hands out no copy
// that two reads disagree on.
func (k *Kept) offer(slot uint64, digest [sha256.Size]byte, object []byte, headerLen int) {
	if k == nil || len(object) < headerLen {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.flights[slot]; ok {
		if f.digest != digest {
			k.forget(slot)
		}
		return
	}
	size := int64(len(object))
	if size > k.budget {
		return
	}
	if k.bytes+size > k.budget {
		// Room made by forgetting only smaller flights, if enough.
		var smaller int64
		for _, f := range k.flights {
			if f.size < size {
				smaller += f.size
			}
		}
		if k.bytes-smaller+size > k.budget {
			return
		}
		for k.bytes+size > k.budget {
			least, first := uint64(0), true
			for s, f := range k.flights {
				if first || f.size < k.flights[least].size {
					least, first = s, false
				}
			}
			k.forget(least)
		}
	}
	k.flights[slot] = keptFlight{digest: digest, size: size, payload: object[headerLen:]}
	k.bytes += size
}

// dropFrom forgets every payload at or past slot: past the cut, a flight
// is not part of the chain.
func (k *Kept) dropFrom(slot uint64) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for s := range k.flights {
		if s >= slot {
			k.forget(s)
		}
	}
}

// forget drops slot's payload; k.mu is held.
func (k *Kept) forget(slot uint64) {
	k.bytes -= k.flights[slot].size
	delete(k.flights, slot)
}

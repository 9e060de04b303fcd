package chain

// What the planted variants of package internal/planted do here; reached
// only in builds with the cutline_planted tag (elsewhere the branches that
// call them are compiled out).

// ackNow is AckOutOfOrder: it acknowledges f as soon as it is committed,
// whatever the slots below it are.
func (w *Writer) ackNow(f *Future) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f.resolve(Position{Epoch: w.epoch, Slot: f.slot}, nil)
}

// failAloneLocked is DeadSlotNoHalt: it releases the dead slot f at the
// release point with its *FencedError, as if it were committed, so that
// the slots past it go on being acknowledged. w.mu is held.
func (w *Writer) failAloneLocked(cell **Future, f *Future) {
	*cell = nil
	w.pipe.relNext++
	w.pipe.released.Store(w.pipe.relNext)
	f.resolve(Position{}, &FencedError{Star: w.star, Epoch: w.epoch, Slot: f.slot})
	<-w.pipe.sem
}

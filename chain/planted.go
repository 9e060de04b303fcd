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

package batch

// SetAfterJudgeForTest sets a hook that Append runs once it judged its
// token and took its stream's state, before it submits.
func (a *DedupAppender) SetAfterJudgeForTest(f func()) { a.afterJudge = f }

// MarkSuspectForTest marks an open stream suspect and its table broken,
// as an append of unknown outcome does.
func (a *DedupAppender) MarkSuspectForTest(stream string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.streams[stream].suspect = true
	a.streams[stream].broken = true
}

// SuspectForTest reports whether the appender knows stream, and whether
// it is suspect.
func (a *DedupAppender) SuspectForTest(stream string) (known, suspect bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.streams[stream]
	return st != nil, st != nil && st.suspect
}

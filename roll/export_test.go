package roll

// ErrClosedForTest is the roller's own closed error, for the external
// tests: it matches cutline.ErrClosed, and tells the roller's closing from
// a closed writer or bucket under it.
var ErrClosedForTest = errClosed

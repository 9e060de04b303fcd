// Package badinput holds no code: its tests feed bad input to every public
// constructor and verb of cutline (configuration, names, object keys,
// oversize values, corrupt, truncated, misplaced and conflicting objects,
// misuse of epochs and writers) and check two things for each: the refusal
// is typed (errors.Is and errors.As reach the sentinel and the typed error
// naming the field), and nothing acknowledged was lost or altered (the
// chain reads back exactly what was acknowledged, other objects and the
// directories outside an fs bucket's root are untouched).
package badinput

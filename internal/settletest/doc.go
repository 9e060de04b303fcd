// Package settletest is the storage environment of the settle and roll
// packages' tests: a cutlinetest.Env over mem or fs zones, parties whose
// settler and fencer a test configures, direct placement of objects behind
// every party's back, and a kill switch that crashes a party at its Nth
// mutating request.
//
// It is an internal package, not part of cutlinetest, because what it adds
// (a party's options, the kill switch) serves these packages' scenario
// tests, not a host. It imports settle, so only external test packages
// (package settle_test, roll_test) can import it.
package settletest

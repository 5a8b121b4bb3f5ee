// Package storetest is the test suite every store.Store implementation
// passes (Run), and helpers that make profiles for tests (Profile, Equal).
package storetest

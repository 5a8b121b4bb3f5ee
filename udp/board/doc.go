// Package board is the daemon's side of the board: a small file in shared
// memory through which hooks on the daemon's host see, at launch time, what
// a UDP round trip would tell them too late (docs/design.md "Board").
//
// The daemon creates the file and writes its header and heartbeat; hooks
// map it and write the launch time of each priority level's launches with
// atomic stores. The daemon reads those words back and validates them; it
// never trusts them for more than an early sign that a better priority is
// launching.
package board

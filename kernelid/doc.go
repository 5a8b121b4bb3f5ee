// Package kernelid computes the identities fikit schedules by: the kernel ID
// (a hash of mangled name, grid and block), the task key of a service, and the
// display names of kernels. It is the Go twin of hookclient/kernelid.c; both are
// checked against the vectors in testdata/. See docs/design.md.
package kernelid

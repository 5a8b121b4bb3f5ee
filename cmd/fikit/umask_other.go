//go:build !unix

package main

func privateFiles() {}

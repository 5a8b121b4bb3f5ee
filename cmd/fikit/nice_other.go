//go:build !linux

package main

import (
	"errors"
	"fmt"
)

func setNice(n int) error { return fmt.Errorf("nice %d: %w", n, errors.ErrUnsupported) }

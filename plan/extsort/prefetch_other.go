//go:build !amd64 && !arm64

package extsort

import "unsafe"

// prefetch does nothing where there is no prefetch instruction written for the architecture.
func prefetch(unsafe.Pointer) {}

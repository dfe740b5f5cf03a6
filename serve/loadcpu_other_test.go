//go:build !linux

package serve_test

import (
	"math"
	"testing"
)

// serverCPU is not measured off Linux (NaN).
func serverCPU(t *testing.T) float64 { return math.NaN() }

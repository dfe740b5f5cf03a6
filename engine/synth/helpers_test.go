package synth_test

import (
	"os"
	"testing"
)

func writeSparse(tb testing.TB, path string, hdr []byte, size int64) {
	tb.Helper()
	fd, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := fd.Write(hdr); err != nil {
		tb.Fatal(err)
	}
	if err := fd.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		tb.Fatal(err)
	}
}

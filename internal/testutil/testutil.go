// Package testutil holds helpers shared by apr's tests.
package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory holding go.mod, found by walking up from the
// current directory (a test's package directory).
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("testutil: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("testutil: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Fixtures returns the absolute path of ../shared/fixtures beside the
// repository. When it is absent the test is skipped with a message saying so:
// those fixtures exist only for apr's own tests.
func Fixtures(tb testing.TB) string {
	tb.Helper()
	dir, err := FixturesDir()
	if err != nil {
		tb.Skipf("SKIP (not a pass): %v; the shared fixtures sit beside the repository only in apr's own checkouts", err)
	}
	return dir
}

// FixturesDir is Fixtures for callers without a testing.TB (fuzz seeding).
func FixturesDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testutil: no go.mod above the working directory")
		}
		dir = parent
	}
	fx := filepath.Join(filepath.Dir(dir), "shared", "fixtures")
	if _, err := os.Stat(fx); err != nil {
		return "", fmt.Errorf("shared fixtures not found at %s", fx)
	}
	return fx, nil
}

// Fixture returns the path of a file under the shared fixtures, skipping the
// test as Fixtures does when they are absent.
func Fixture(tb testing.TB, rel string) string {
	tb.Helper()
	return filepath.Join(Fixtures(tb), rel)
}

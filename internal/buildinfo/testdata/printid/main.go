// Command printid prints buildinfo.Current() as JSON; buildinfo's tests build
// it with different link-time stamps.
package main

import (
	"encoding/json"
	"os"

	"github.com/aprqa/apr/internal/buildinfo"
)

func main() {
	if err := json.NewEncoder(os.Stdout).Encode(buildinfo.Current()); err != nil {
		os.Exit(1)
	}
}

module github.com/aprqa/apr

go 1.26.0

require (
	github.com/spf13/cobra v1.10.2
	golang.org/x/sys v0.50.0
)

require (
	cuelang.org/go v0.17.1 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/leanovate/gopter v0.2.11 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
)

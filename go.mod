module github.com/blockrpc/blockrpc

go 1.24.0

require (
	github.com/decred/dcrd/dcrec/secp256k1/v4 v4.4.1
	github.com/google/go-cmp v0.7.0
	github.com/holiman/uint256 v1.3.2
	golang.org/x/crypto v0.45.0
	golang.org/x/time v0.14.0
)

require golang.org/x/sys v0.38.0 // indirect

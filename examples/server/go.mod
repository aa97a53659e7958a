module github.com/blockrpc/blockrpc/examples/server

go 1.24.0

require (
	github.com/blockrpc/blockrpc v0.0.0
	github.com/blockrpc/blockrpc/adapters/prometheus v0.0.0
	github.com/holiman/uint256 v1.3.2
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/decred/dcrd/dcrec/secp256k1/v4 v4.4.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/crypto v0.45.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)

replace (
	github.com/blockrpc/blockrpc => ../..
	github.com/blockrpc/blockrpc/adapters/prometheus => ../../adapters/prometheus
)

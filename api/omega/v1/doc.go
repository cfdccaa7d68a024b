// Package omegav1 holds the protobuf schema of omega's cell state (machines,
// jobs, tasks) and of its transactions, and the Go generated from it. The
// gRPC service (service.proto) generates into package cellgrpc, so that
// these messages link no gRPC.
//
// The generated files are committed, so building needs no protoc. To
// regenerate: install protoc (apt-get install -y protobuf-compiler) and the
// pinned plugins
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
//
// then run go generate ./... from the module root (with ~/go/bin on PATH).
package omegav1

//go:generate protoc -I ../.. --go_out=../.. --go_opt=paths=source_relative omega/v1/cell.proto omega/v1/txn.proto omega/v1/member.proto
//go:generate protoc -I ../.. --go_out=../../.. --go_opt=module=github.com/omega-cell/omega --go-grpc_out=../../.. --go-grpc_opt=module=github.com/omega-cell/omega omega/v1/service.proto omega/v1/peer.proto

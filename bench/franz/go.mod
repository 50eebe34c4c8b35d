module lagless.dev/bench/franz

go 1.24.0

require github.com/twmb/franz-go v1.20.0

require (
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.12.0 // indirect
)

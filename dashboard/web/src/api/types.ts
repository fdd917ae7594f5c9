// The dashboard API's JSON, in the words of the CLI and the SDK. The types
// are generated from the Go structs the backend encodes (types.gen.ts, by
// `go run ./hack/tsgen`; make verify checks they are current): change the
// Go struct, not these.
export type * from './types.gen';

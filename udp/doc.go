// Package udp is fikit's wire protocol between the hook (hookclient/, in
// every service) and the daemon (fikit serve): message types, their msgpack
// codec, and the daemon's socket. docs/design.md ("Wire protocol v1") is the
// specification: datagrams, encoding and decoding rules, the conversation.
//
// A message type is one row of the table in messages.go and its Go struct.
// The C hook's message table and decoder (hookclient/wire_gen.h) and
// docs/design.md's message tables are generated from the table by
// `go generate ./udp` (udp/internal/wiregen, which fails its test while they
// are stale); testdata/vectors.txt, decode_only.txt and invalid.txt pin the
// bytes for Go and C alike, and auth.txt the MACs ([Authenticator]).
//
// [Append] encodes, [Decode] decodes into a new message, and a reusable
// [Decoder] decodes without allocating: a hand-written path reads the
// all-integer messages in their canonical form, the vmihailenco/msgpack
// decoder everything else, with the same result. [Format] and [ParseText]
// convert to and from the text form of the vector files. [Listen] opens the
// daemon's socket ([Conn]), [Dial] a small client for tests and tools.
package udp

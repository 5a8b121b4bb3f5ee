package udp

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt from the lists in the tests")

const (
	vectorsFile    = "testdata/vectors.txt"
	decodeOnlyFile = "testdata/decode_only.txt"
	invalidFile    = "testdata/invalid.txt"
)

type vector struct {
	name string
	msg  Message
}

var testUUID = [16]byte{0x5a, 0x1b, 0x6e, 0x3c, 0x94, 0x27, 0x4f, 0x1d, 0x8e, 0x0b, 0xc2, 0x7a, 0x61, 0x33, 0xd8, 0x05}

// boundaryU32 and boundaryU64 are the integers at the edges of msgpack's
// encodings.
var (
	boundaryU32 = []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32}
	boundaryU64 = append(boundaryU32[:len(boundaryU32):len(boundaryU32)], 1<<32, math.MaxUint64-1, math.MaxUint64)
)

// maxRecord has the largest encoding of a record (29 bytes).
var maxRecord = Record{KernelID: math.MaxUint64, DurationNS: math.MaxUint64, GapNS: math.MaxUint64, Flags: FlagGapSpansRunEnd | FlagOverlapped}

// kernelInfoNameFit is the longest KernelInfo name that fits for the task,
// kernel and dimensions of the kernel_info_name_* vectors.
const kernelInfoNameFit = MaxDatagram - (1 + 1 + 1 + 5 + 9 + 3 + 1 + 5*3 + 1 + 5*3)

// vectorCases lists testdata/vectors.txt.
func vectorCases() []vector {
	var vs []vector
	add := func(name string, m Message) { vs = append(vs, vector{name, m}) }

	add("register_basic", Register{Seq: 1, TaskKey: "python3 serve.py --port 8000", PID: 4242, Priority: 0,
		DeviceUUID: testUUID, DeviceName: "NVIDIA H100 80GB HBM3", HookFlags: 0})
	add("register_zero", Register{})
	add("register_max", Register{Seq: math.MaxUint32, TaskKey: strings.Repeat("k", 200), PID: math.MaxUint32, Priority: 9,
		DeviceUUID: [16]byte{0: 0xff, 15: 0xff}, DeviceName: strings.Repeat("d", 256), HookFlags: math.MaxUint32})
	add("register_str_fix31_str8_32", Register{Seq: 2, TaskKey: strings.Repeat("a", 31), PID: 128, Priority: 5,
		DeviceUUID: testUUID, DeviceName: strings.Repeat("b", 32), HookFlags: 1})
	add("register_str8_255_str16_256", Register{Seq: 3, TaskKey: strings.Repeat("c", 255), PID: 65536, Priority: 9,
		DeviceUUID: testUUID, DeviceName: strings.Repeat("e", 256), HookFlags: 256})
	add("register_escapes", Register{Seq: 4, TaskKey: "tab\there new\nline back\\slash \"quoted\" | pipe = eq", PID: 1,
		Priority: 3, DeviceUUID: testUUID, DeviceName: "\x00\x01\x7f\x80\xff", HookFlags: 0})
	add("register_unicode", Register{Seq: 5, TaskKey: "сервис --модель=ř 日本語", PID: 77, Priority: 1,
		DeviceUUID: testUUID, DeviceName: "GPU κ", HookFlags: 0})
	add("register_weight", Register{Seq: 6, TaskKey: "svc", PID: 9, Priority: 5, DeviceUUID: testUUID, DeviceName: "g",
		HookFlags: HookSendsToken, Weight: 2})
	add("register_weight_max", Register{Seq: 7, TaskKey: "svc", PID: 9, Priority: 5, DeviceUUID: testUUID, DeviceName: "g",
		Weight: MaxWeight})

	for _, v := range boundaryU32 {
		add(fmt.Sprintf("launch_notify_task_%d", v), LaunchNotify{TaskID: uint32(v), Seq: 1, KernelID: 0x1a60b5313197dee7})
	}
	for _, v := range boundaryU32 {
		add(fmt.Sprintf("launch_notify_seq_%d", v), LaunchNotify{TaskID: 1, Seq: uint32(v), KernelID: 0x1a60b5313197dee7})
	}
	for _, v := range boundaryU64 {
		add(fmt.Sprintf("launch_notify_kernel_%d", v), LaunchNotify{TaskID: 1, Seq: 2, KernelID: v})
	}
	add("launch_request_basic", LaunchRequest{TaskID: 3, Seq: 17, KernelID: 0xeabe423fa458ec9a})
	add("launch_request_max", LaunchRequest{TaskID: math.MaxUint32, Seq: math.MaxUint32, KernelID: math.MaxUint64})
	add("launch_request_zero", LaunchRequest{})

	add("measurements_empty", Measurements{TaskID: 1, Run: 2})
	add("measurements_one", Measurements{TaskID: 1, Run: 1, Records: []Record{{KernelID: 0x1a60b5313197dee7, DurationNS: 15000, GapNS: 2500}}})
	add("measurements_flags", Measurements{TaskID: 300, Run: 70000, Records: []Record{
		{KernelID: 1, DurationNS: 0, GapNS: 0, Flags: 0},
		{KernelID: 2, DurationNS: 127, GapNS: 128, Flags: FlagGapSpansRunEnd},
		{KernelID: 3, DurationNS: 255, GapNS: 256, Flags: FlagOverlapped},
		{KernelID: 4, DurationNS: 65535, GapNS: 65536, Flags: FlagGapSpansRunEnd | FlagOverlapped},
		{KernelID: math.MaxUint64, DurationNS: math.MaxUint32, GapNS: 1 << 32, Flags: 0},
	}})
	add("measurements_15", Measurements{TaskID: 2, Run: 3, Records: recordRun(15)})
	add("measurements_16", Measurements{TaskID: 2, Run: 3, Records: recordRun(16)})
	full := make([]Record, 47) // the most worst-case records that fit: 1379 bytes
	for i := range full {
		full[i] = maxRecord
	}
	add("measurements_full", Measurements{TaskID: math.MaxUint32, Run: math.MaxUint32, Records: full})

	for r := ReasonStreamSync; r <= ReasonExplicit; r++ {
		add(fmt.Sprintf("run_end_reason_%d", r), RunEnd{TaskID: 1, Run: uint32(r), Kernels: 120, RunNS: 8_500_000, Reason: r, LastSeq: 120 * uint32(r)})
	}
	add("run_end_max", RunEnd{TaskID: math.MaxUint32, Run: math.MaxUint32, Kernels: math.MaxUint32, RunNS: math.MaxUint64, Reason: ReasonExplicit, LastSeq: math.MaxUint32})
	add("run_end_zero", RunEnd{Reason: ReasonStreamSync})

	for _, v := range []uint64{0, 1, 128, math.MaxUint32} {
		add(fmt.Sprintf("heartbeat_%d", v), Heartbeat{TaskID: uint32(v)})
	}
	add("goodbye_basic", Goodbye{TaskID: 9})
	add("goodbye_max", Goodbye{TaskID: math.MaxUint32})

	add("register_ack_holder_profiling", RegisterAck{Seq: 1, TaskID: 1, Role: RoleHolder, Phase: PhaseProfiling, ProfileRuns: 100, HeartbeatMS: 1000})
	add("register_ack_waiter_sharing", RegisterAck{Seq: 2, TaskID: 300, Role: RoleWaiter, Phase: PhaseSharing, ProfileRuns: 1000, HeartbeatMS: 250})
	add("register_ack_max", RegisterAck{Seq: math.MaxUint32, TaskID: math.MaxUint32, Role: RoleWaiter, Phase: PhaseSharing,
		ProfileRuns: math.MaxUint32, HeartbeatMS: math.MaxUint32})
	add("register_ack_min", RegisterAck{Role: RoleHolder, Phase: PhaseProfiling})
	add("register_ack_board", RegisterAck{Seq: 1, TaskID: 2, Role: RoleWaiter, Phase: PhaseSharing, ProfileRuns: 100,
		HeartbeatMS: 1000, Board: "/home/u/.local/share/fikit/board", BoardGen: 0x0123456789abcdef, BoardGPU: 3})
	add("register_ack_board_gpu_max", RegisterAck{Seq: 1, TaskID: 2, Role: RoleHolder, Phase: PhaseSharing,
		Board: "b", BoardGen: 1, BoardGPU: BoardGPUs - 1})

	add("grant_basic", Grant{TaskID: 7, Seq: 300, Credit: 0})
	for _, v := range boundaryU32 {
		add(fmt.Sprintf("grant_credit_%d", v), Grant{TaskID: 2, Seq: 5, Credit: uint32(v)})
	}
	add("grant_max", Grant{TaskID: math.MaxUint32, Seq: math.MaxUint32, Credit: math.MaxUint32})
	add("register_ack_token", RegisterAck{Seq: 1, TaskID: 2, Role: RoleWaiter, Phase: PhaseSharing, ProfileRuns: 100,
		HeartbeatMS: 1000, Token: 0x8badf00ddeadbeef})
	add("register_ack_board_token", RegisterAck{Seq: 1, TaskID: 2, Role: RoleHolder, Phase: PhaseSharing,
		Board: "b", BoardGen: 7, BoardGPU: 1, Token: 1})
	add("register_ack_sample", RegisterAck{Seq: 1, TaskID: 2, Role: RoleHolder, Phase: PhaseSharing, ProfileRuns: 100,
		HeartbeatMS: 20, Board: "b", BoardGen: 7, BoardGPU: 1, Token: 1, Sample: 16})
	add("register_ack_sample_no_board", RegisterAck{Seq: 1, TaskID: 2, Role: RoleHolder, Phase: PhaseSharing, ProfileRuns: 100,
		HeartbeatMS: 20, Sample: 1})
	add("launch_notify_token", LaunchNotify{TaskID: 3, Seq: 9, KernelID: 0x1a60b5313197dee7, Token: 0xfedcba9876543210})
	add("launch_request_token", LaunchRequest{TaskID: 3, Seq: 10, KernelID: 5, Token: 42})
	add("measurements_token", Measurements{TaskID: 3, Run: 2, Records: []Record{{KernelID: 1, DurationNS: 2, GapNS: 3}}, Token: 1 << 40})
	add("run_end_token", RunEnd{TaskID: 3, Run: 2, Kernels: 1, RunNS: 100, Reason: ReasonStreamSync, LastSeq: 9, Token: 77})
	for u := UnmeasuredStalled; u <= UnmeasuredStopped; u++ {
		add(fmt.Sprintf("run_end_unmeasured_%d", u), RunEnd{TaskID: 3, Run: 4, Kernels: 7, RunNS: 100, Reason: ReasonStreamSync,
			LastSeq: 30, Token: 77, Unmeasured: u})
	}
	add("run_end_unmeasured_no_token", RunEnd{TaskID: 3, Run: 4, Kernels: 7, RunNS: 100, Reason: ReasonStreamSync,
		LastSeq: 30, Unmeasured: UnmeasuredUncertain})
	add("flush", Flush{TaskID: 3, Seq: 1})
	add("flush_token", Flush{TaskID: 3, Seq: 2, Token: 77})
	add("flush_max", Flush{TaskID: math.MaxUint32, Seq: math.MaxUint32, Token: math.MaxUint64})
	add("flushed", Flushed{TaskID: 3, Seq: 2})
	add("flushed_max", Flushed{TaskID: math.MaxUint32, Seq: math.MaxUint32})
	add("heartbeat_token", Heartbeat{TaskID: 3, Token: math.MaxUint64})
	add("goodbye_token", Goodbye{TaskID: 3, Token: 1})
	add("kernel_info_token", KernelInfo{TaskID: 3, KernelID: 5, Name: "k", Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}, Token: 99})
	add("launch_batch_token", LaunchBatch{TaskID: 3, Seq: 1, BaseNS: 1000, Launches: []Launch{{KernelID: 5, OffsetNS: 0}, {KernelID: 6, OffsetNS: 20}}, Token: 1234567})
	add("grant_gate", Grant{TaskID: 2, Seq: 5, Credit: 3, Gate: Gate{SeenNS: 123456789012, ExpiresNS: 123457789012}})
	add("grant_seen_only", Grant{TaskID: 2, Seq: 5, Credit: 3, Gate: Gate{SeenNS: 1}})
	add("grant_expires_only", Grant{TaskID: 2, Seq: 5, Gate: Gate{ExpiresNS: math.MaxUint64}})
	add("launch_batch_one", LaunchBatch{TaskID: 1, Seq: 1, BaseNS: 123_456_789_012, Launches: []Launch{{KernelID: 0x1a60b5313197dee7}}})
	add("launch_batch_offsets", LaunchBatch{TaskID: 3, Seq: 40, BaseNS: 1 << 40, Launches: []Launch{
		{KernelID: 0x1a60b5313197dee7, OffsetNS: 0}, {KernelID: 0xeabe423fa458ec9a, OffsetNS: 127},
		{KernelID: 1, OffsetNS: 128}, {KernelID: 2, OffsetNS: 65535}, {KernelID: 3, OffsetNS: 65536},
		{KernelID: math.MaxUint64, OffsetNS: math.MaxUint32}}})
	add("launch_batch_empty", LaunchBatch{TaskID: 2, Seq: 9, BaseNS: 5})
	add("launch_batch_max", LaunchBatch{TaskID: math.MaxUint32, Seq: math.MaxUint32, BaseNS: math.MaxUint64,
		Launches: []Launch{{KernelID: math.MaxUint64, OffsetNS: math.MaxUint32}}})
	fullL := make([]Launch, 91) // the most worst-case launches that fit: 1390 bytes
	for i := range fullL {
		fullL[i] = Launch{KernelID: math.MaxUint64, OffsetNS: math.MaxUint32}
	}
	add("launch_batch_full", LaunchBatch{TaskID: math.MaxUint32, Seq: math.MaxUint32, BaseNS: math.MaxUint64, Launches: fullL})
	add("kernel_times_basic", KernelTimes{TaskID: 7, BoundNS: 200_000, DefaultNS: 50_000,
		Kernels: []KernelTime{{KernelID: 0x1a60b5313197dee7, DurationNS: 12_345}, {KernelID: 5, DurationNS: 479_000}}})
	add("kernel_times_empty", KernelTimes{TaskID: 7})
	add("kernel_times_max", KernelTimes{TaskID: math.MaxUint32, BoundNS: math.MaxUint32, DefaultNS: math.MaxUint32,
		Kernels: []KernelTime{{KernelID: math.MaxUint64, DurationNS: math.MaxUint32}}})
	fullK := make([]KernelTime, 91) // the most worst-case kernels that fit: 1388 bytes
	for i := range fullK {
		fullK[i] = KernelTime{KernelID: math.MaxUint64, DurationNS: math.MaxUint32}
	}
	add("kernel_times_full", KernelTimes{TaskID: math.MaxUint32, BoundNS: math.MaxUint32, DefaultNS: math.MaxUint32, Kernels: fullK})
	add("calibrate_basic", Calibrate{TaskID: 7, Seq: 1, ProbeNS: 5000})
	add("calibrate_zero", Calibrate{})
	add("calibrate_max", Calibrate{TaskID: math.MaxUint32, Seq: math.MaxUint32, ProbeNS: math.MaxUint32})
	add("warm_basic", Warm{TaskID: 7, Seq: 1, ProbeNS: 1000})
	add("warm_zero", Warm{})
	add("warm_max", Warm{TaskID: math.MaxUint32, Seq: math.MaxUint32, ProbeNS: math.MaxUint32})
	add("calibration_basic", Calibration{TaskID: 7, Seq: 1, HostNS: 150_000, DeviceNS: 5_000})
	add("calibration_mps", Calibration{TaskID: 7, Seq: 2, HostNS: 5_000, DeviceNS: 5_000, Flags: CalibrationMPS})
	add("calibration_failed_token", Calibration{TaskID: 7, Seq: 3, Flags: CalibrationFailed, Token: 1234567})
	add("calibration_max", Calibration{TaskID: math.MaxUint32, Seq: math.MaxUint32, HostNS: math.MaxUint64,
		DeviceNS: math.MaxUint64, Flags: CalibrationMPS | CalibrationFailed, Token: math.MaxUint64})
	add("hold_basic", Hold{TaskID: 7, Seq: 301})
	add("hold_zero", Hold{})
	add("hold_max", Hold{TaskID: math.MaxUint32, Seq: math.MaxUint32})

	for _, r := range []Role{RoleHolder, RoleWaiter} {
		for _, p := range []Phase{PhaseProfiling, PhaseSharing} {
			add(fmt.Sprintf("state_role_%d_phase_%d", r, p), State{TaskID: 4, Role: r, Phase: p, Credit: 10})
		}
	}
	add("state_revoke", State{TaskID: 4, Role: RoleWaiter, Phase: PhaseSharing, Credit: 0})
	add("state_max", State{TaskID: math.MaxUint32, Role: RoleWaiter, Phase: PhaseSharing, Credit: math.MaxUint32})
	add("state_gate", State{TaskID: 4, Role: RoleHolder, Phase: PhaseSharing, Gate: Gate{SeenNS: 987654321, ExpiresNS: 0}})
	add("state_sample", State{TaskID: 4, Role: RoleHolder, Phase: PhaseSharing, Sample: 16})
	add("state_sample_every", State{TaskID: 4, Role: RoleHolder, Phase: PhaseSharing, Credit: 3, Sample: 1})
	add("state_credit_gate", State{TaskID: 4, Role: RoleWaiter, Phase: PhaseSharing, Credit: 8,
		Gate: Gate{SeenNS: 5, ExpiresNS: 6000000}})

	for c := CodeUnknownTask; c <= CodeOverloaded; c++ {
		add(fmt.Sprintf("error_code_%d", c), Error{Code: c, TaskID: 12, Message: c.String()})
	}
	add("error_empty", Error{Code: CodeMalformed})
	add("error_long", Error{Code: CodeInvalidValue, TaskID: math.MaxUint32, Message: strings.Repeat("long message ", 30)})
	add("error_escapes", Error{Code: CodeMalformed, TaskID: 1, Message: "bad \"field\"\tat\nbyte \\ 3 \xff"})

	add("kernel_info_basic", KernelInfo{TaskID: 1, KernelID: 0x1a60b5313197dee7, Name: "_Z10add_kernelPfPKfS1_i",
		Grid: [3]uint32{256, 1, 1}, Block: [3]uint32{256, 1, 1}})
	add("kernel_info_empty_name", KernelInfo{TaskID: 1, KernelID: 0x7bd7cd961b67150b})
	add("kernel_info_dims", KernelInfo{TaskID: 2, KernelID: 5, Name: "k",
		Grid: [3]uint32{0, 127, 128}, Block: [3]uint32{65535, 65536, math.MaxUint32}})
	add("kernel_info_graph", KernelInfo{TaskID: 2, KernelID: 0x1c67802e7e823972,
		Name: "fikit.graph:1a60b5313197dee7,000000000000000f", Grid: [3]uint32{}, Block: [3]uint32{}})
	add("kernel_info_unicode", KernelInfo{TaskID: 2, KernelID: 6, Name: "ядро\x00\xff", Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}})
	maxDims := [3]uint32{math.MaxUint32, math.MaxUint32, math.MaxUint32}
	long := func(n int) string { return strings.Repeat("_ZN7cutlass", n/11+1)[:n] }
	add("kernel_info_name_fits", KernelInfo{TaskID: math.MaxUint32, KernelID: math.MaxUint64, Name: long(kernelInfoNameFit), Grid: maxDims, Block: maxDims})
	add("kernel_info_name_cut_by_1", KernelInfo{TaskID: math.MaxUint32, KernelID: math.MaxUint64, Name: long(kernelInfoNameFit + 1), Grid: maxDims, Block: maxDims})
	add("kernel_info_name_cut_small", KernelInfo{TaskID: 1, KernelID: 1, Name: long(1500), Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}})
	return vs
}

// recordRun returns n distinct small records.
func recordRun(n int) []Record {
	rs := make([]Record, n)
	for i := range rs {
		rs[i] = Record{KernelID: uint64(1000 + i), DurationNS: uint64(10 * i), GapNS: uint64(i), Flags: RecordFlags(i % 4)}
	}
	return rs
}

// decodeOnly lists testdata/decode_only.txt: datagrams in forms an encoder
// never produces that decoders must accept, with the message they decode to.
func decodeOnlyCases() []struct{ name, text, hex string } {
	return []struct{ name, text, hex string }{
		{"int_uint8_small", "Heartbeat task_id=5", "930106cc05"},
		{"int_uint16_small", "Heartbeat task_id=5", "930106cd0005"},
		{"int_uint32_small", "Heartbeat task_id=5", "930106ce00000005"},
		{"int_uint64_small", "Heartbeat task_id=5", "930106cf0000000000000005"},
		{"int_int8_positive", "Heartbeat task_id=5", "930106d005"},
		{"int_int16_positive", "Heartbeat task_id=300", "930106d1012c"},
		{"int_int32_positive", "Heartbeat task_id=70000", "930106d200011170"},
		{"int_int64_positive", "LaunchNotify task_id=1 seq=2 kernel_id=9223372036854775807", "95010201" + "02" + "d37fffffffffffffff"},
		{"int_zero_int8", "Hold task_id=0 seq=0", "94010ad000d100 00"},
		{"version_uint8", "Heartbeat task_id=1", "93cc010601"},
		{"type_uint16", "Heartbeat task_id=1", "9301cd000601"},
		{"array16_header", "Grant task_id=7 seq=300 credit=0", "dc00050109" + "07cd012c00"},
		{"array32_header", "Grant task_id=7 seq=300 credit=0", "dd000000050109" + "07cd012c00"},
		{"str8_short", "Error code=3 task_id=1 message=\"x\"", "95010c0301d90178"},
		{"str16_short", "Error code=3 task_id=1 message=\"x\"", "95010c0301da000178"},
		{"str32_empty", "Error code=3 task_id=1 message=\"\"", "95010c0301db00000000"},
		{"bin16_uuid", "Register seq=1 task_key=\"k\" pid=2 priority=3 device_uuid=hex:000102030405060708090a0b0c0d0e0f device_name=\"d\" hook_flags=0",
			"99010101" + "a16b" + "02" + "03" + "c50010000102030405060708090a0b0c0d0e0f" + "a164" + "00"},
		{"extra_int", "Grant task_id=7 seq=300 credit=0 seen_ns=0 expires_ns=0", "98010907cd012c00" + "0000" + "2a"},
		{"optional_zero", "Grant task_id=7 seq=300 credit=0", "96010907cd012c00" + "00"},
		{"extra_nil_bool_float", "Hold task_id=1 seq=2", "97010a0102" + "c0c3cb3ff0000000000000"},
		{"extra_str_bin", "Heartbeat task_id=1 token=0", "96010601" + "00" + "a3616263" + "c4020102"},
		{"extra_array_map", "Heartbeat task_id=1 token=0", "97010601" + "00" + "93010203" + "82a161019102a162" + "92c0c2"},
		{"extra_ext", "Heartbeat task_id=1 token=0", "96010601" + "00" + "d40501" + "c7030a616263"},
		{"extra_nested_deep", "Heartbeat task_id=1 token=0", "95010601" + "00" + strings.Repeat("91", 300) + "00"},
		{"extra_many", "Goodbye task_id=1", "dc00100107" + "01" + strings.Repeat("00", 13)},
		{"register_ack_extra", "RegisterAck seq=1 task_id=1 role=1 phase=1 profile_runs=100 heartbeat_ms=1000",
			"9e0108010101016" + "4cd03e8" + "a0" + "00" + "00" + "00" + "00" + "a46e657721"},
		{"state_extra", "State task_id=4 role=2 phase=2 credit=0", "9a010b04020200" + "0000" + "00" + "9100"},
		{"error_extra", "Error code=1 task_id=12 message=\"\"", "96010c010ca0c0"},
		{"record_extra_elements", "Measurements task_id=1 run=1 records=[[1,2,3,0];[4,5,6,1]]",
			"95010401019295010203" + "00" + "c0" + "9404050601"},
		{"records_array16", "Measurements task_id=1 run=1 records=[[1,2,3,0]]", "9501040101dc00019401020300"},
		{"triple_array16", "KernelInfo task_id=1 kernel_id=2 name=\"k\" grid=[1,2,3] block=[4,5,6]",
			"97010d0102a16b" + "dc0003010203" + "93040506"},
	}
}

// vectorFile is one parsed line: name, text form, hex.
type vectorLine struct {
	line             int
	name, text, hexs string
}

// splitVectorLine splits "<name> <text> | <hex>" at the first space and the
// last " | "; the hex never contains '|', the text may.
func splitVectorLine(s string) (name, text, hexs string, err error) {
	i := strings.LastIndex(s, " | ")
	if i < 0 {
		return "", "", "", fmt.Errorf("no \" | \": %w", ErrSyntax)
	}
	hexs = s[i+3:]
	name, text, ok := strings.Cut(s[:i], " ")
	if !ok || name == "" {
		return "", "", "", fmt.Errorf("no name: %w", ErrSyntax)
	}
	return name, text, hexs, nil
}

func readVectorFile(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

// dataLines returns the non-comment, non-empty lines of a vector file with
// 1-based line numbers.
func dataLines(t testing.TB, path string) (lines []string, numbers []int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader([]byte(strings.Join(readVectorFile(t, path), "\n"))))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
			numbers = append(numbers, n)
		}
	}
	return lines, numbers
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func vectorLineOf(t testing.TB, v vector) string {
	t.Helper()
	b, err := Append(nil, v.msg)
	if err != nil {
		t.Fatalf("%s: %v", v.name, err)
	}
	return v.name + " " + Format(v.msg) + " | " + hex.EncodeToString(b)
}

const vectorsHeader = `# fikit wire protocol v1 vectors (docs/design.md "Wire protocol v1"); read by the Go and C tests.
# <name> <Type> <field>=<value>... | <hex>
# Fields in wire order. Values: decimal integers; "..." strings with the escapes \\ \t \n \xHH (every
# byte outside printable ASCII, and '"' as \x22); hex:... for the 16-byte UUID; [a,b,c] for grid and
# block; records=[[kernel_id,duration_ns,gap_ns,flags];...] ([] if none). The hex follows the LAST
# " | " of the line. Encoding the fields must give the hex exactly; decoding the hex must give the
# fields, except that a KernelInfo name that does not fit is cut (its datagram is then 1400 bytes).
# Generated by: go test ./udp -run TestVectors -rewrite
`

const decodeOnlyHeader = `# fikit wire protocol v1: datagrams no encoder produces that every decoder must accept
# (non-minimal integer, string and array encodings, signed encodings of non-negative values, extra
# array elements of any msgpack kind). Same line format as vectors.txt; decode the hex and compare
# with the fields. Generated by: go test ./udp -run TestVectors -rewrite
`

func writeFile(t testing.TB, path string, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func generatedVectorFiles(t testing.TB) (vectors, decodeOnly string) {
	var b strings.Builder
	b.WriteString(vectorsHeader)
	for _, v := range vectorCases() {
		b.WriteString(vectorLineOf(t, v))
		b.WriteByte('\n')
	}
	vectors = b.String()
	b.Reset()
	b.WriteString(decodeOnlyHeader)
	for _, c := range decodeOnlyCases() {
		b.WriteString(c.name + " " + c.text + " | " + hex.EncodeToString(mustHex(t, c.hex)) + "\n")
	}
	return vectors, b.String()
}

func TestVectors(t *testing.T) {
	vectors, decodeOnly := generatedVectorFiles(t)
	invalid := generatedInvalidFile(t)
	if *rewrite {
		writeFile(t, vectorsFile, vectors)
		writeFile(t, decodeOnlyFile, decodeOnly)
		writeFile(t, invalidFile, invalid)
	}
	for path, want := range map[string]string{vectorsFile: vectors, decodeOnlyFile: decodeOnly, invalidFile: invalid} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s differs from the lists in the tests (run with -rewrite after checking why)", path)
		}
	}

	seen := map[Type]bool{}
	lines, numbers := dataLines(t, vectorsFile)
	for i, line := range lines {
		name, text, hexs, err := splitVectorLine(line)
		if err != nil {
			t.Errorf("line %d: %v", numbers[i], err)
			continue
		}
		m, err := ParseText(text)
		if err != nil {
			t.Errorf("line %d %s: %v", numbers[i], name, err)
			continue
		}
		seen[m.Type()] = true
		if got := Format(m); got != text {
			t.Errorf("line %d %s: text is not canonical:\n got %s\nwant %s", numbers[i], name, got, text)
		}
		want := mustHex(t, hexs)
		enc, err := Append(nil, m)
		if err != nil || !bytes.Equal(enc, want) {
			t.Errorf("line %d %s: encodes to %x, %v\nwant %x", numbers[i], name, enc, err, want)
		}
		checkDecodes(t, fmt.Sprintf("line %d %s", numbers[i], name), want, m)
	}
	for _, m := range Schema() {
		if ty := m.Type; !seen[ty] {
			t.Errorf("no vector of type %v", ty)
		}
	}

	lines, numbers = dataLines(t, decodeOnlyFile)
	for i, line := range lines {
		name, text, hexs, err := splitVectorLine(line)
		if err != nil {
			t.Errorf("line %d: %v", numbers[i], err)
			continue
		}
		m, err := ParseText(text)
		if err != nil {
			t.Errorf("line %d %s: %v", numbers[i], name, err)
			continue
		}
		b := mustHex(t, hexs)
		if enc, _ := Append(nil, m); bytes.Equal(enc, b) {
			t.Errorf("line %d %s: canonical encoding; belongs in vectors.txt", numbers[i], name)
		}
		checkDecodes(t, fmt.Sprintf("%s line %d %s", decodeOnlyFile, numbers[i], name), b, m)
	}
}

// checkDecodes decodes b with Decode, a Decoder and the full path alone and
// compares each result with want (a KernelInfo name may be cut).
func checkDecodes(t *testing.T, what string, b []byte, want Message) {
	t.Helper()
	var d Decoder
	for _, dec := range []struct {
		how string
		fn  func([]byte) (Message, error)
	}{{"Decode", Decode}, {"Decoder.Decode", d.Decode}, {"full", d.decodeFull}} {
		got, err := dec.fn(b)
		if err != nil {
			t.Errorf("%s: %s: %v", what, dec.how, err)
			continue
		}
		if !sameMessage(got, want, len(b)) {
			t.Errorf("%s: %s:\n got %s\nwant %s", what, dec.how, short(Format(got)), short(Format(want)))
		}
	}
}

// decodeFull decodes with the msgpack-based path only.
func (d *Decoder) decodeFull(b []byte) (Message, error) {
	if len(b) > MaxDatagram {
		return nil, fmt.Errorf("decode: %d bytes: %w", len(b), ErrTooLarge)
	}
	t, err := d.full(b)
	if err != nil {
		return nil, err
	}
	m := d.slot(t)
	m.get(&d.v)
	return m, nil
}

// short cuts s for error messages.
func short(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// deref returns the message value behind a pointer.
func deref(m Message) Message {
	return reflect.Indirect(reflect.ValueOf(m)).Interface().(Message)
}

// sameMessage compares messages by value, treating nil and empty Records as
// equal and allowing got's KernelInfo name to be a prefix of want's when the
// datagram has the maximum size.
func sameMessage(got, want Message, size int) bool {
	got, want = deref(got), deref(want)
	if g, ok := got.(Measurements); ok {
		w, ok := want.(Measurements)
		return ok && g.TaskID == w.TaskID && g.Run == w.Run && len(g.Records) == len(w.Records) &&
			(len(g.Records) == 0 || reflect.DeepEqual(g.Records, w.Records))
	}
	if g, ok := got.(KernelInfo); ok {
		w, ok := want.(KernelInfo)
		if ok && g.Name != w.Name && size == MaxDatagram && strings.HasPrefix(w.Name, g.Name) {
			w.Name = g.Name
		}
		return ok && g == w
	}
	return reflect.DeepEqual(got, want)
}

// Bytes written out by hand from the msgpack spec, independent of the
// encoder: the test fails if encoder and vector file drift together.
func TestPinnedBytes(t *testing.T) {
	for _, v := range []struct {
		msg  Message
		want string
	}{
		// fixarray(3), version 1, type 6, task_id 1
		{Heartbeat{TaskID: 1}, "93 01 06 01"},
		// fixarray(3), 1, 7, uint32 0xffffffff
		{Goodbye{TaskID: math.MaxUint32}, "93 01 07 ce ff ff ff ff"},
		// fixarray(5), 1, 9, task 7, seq uint16 300, credit 0
		{Grant{TaskID: 7, Seq: 300, Credit: 0}, "95 01 09 07 cd 01 2c 00"},
		// fixarray(5), 1, 2, task uint8 128, seq uint32 65536, kernel uint64 max
		{LaunchNotify{TaskID: 128, Seq: 65536, KernelID: math.MaxUint64}, "95 01 02 cc 80 ce 00 01 00 00 cf ff ff ff ff ff ff ff ff"},
		// fixarray(6), 1, 14, task 2, seq 9, base 5, launches fixarray(1) of fixarray(2) [kernel uint8 200, offset uint16 1000]
		{LaunchBatch{TaskID: 2, Seq: 9, BaseNS: 5, Launches: []Launch{{200, 1000}}}, "96 01 0e 02 09 05 91 92 cc c8 cd 03 e8"},
		// fixarray(5), 1, 4, task 1, run 2, fixarray(0)
		{Measurements{TaskID: 1, Run: 2}, "95 01 04 01 02 90"},
		// ... records fixarray(1) of fixarray(4) [uint16 256, 0, uint8 255, 3]
		{Measurements{TaskID: 1, Run: 2, Records: []Record{{256, 0, 255, 3}}}, "95 01 04 01 02 91 94 cd 01 00 00 cc ff 03"},
		// fixarray(7), 1, 5, task 1, run 2, kernels 3, run_ns uint32 10^9, reason 5
		{RunEnd{TaskID: 1, Run: 2, Kernels: 3, RunNS: 1_000_000_000, Reason: ReasonExplicit, LastSeq: 9}, "98 01 05 01 02 03 ce 3b 9a ca 00 05 09"},
		// fixarray(8), 1, 8, seq 1, task 2, role 1, phase 1, profile_runs 100, heartbeat uint16 1000
		{RegisterAck{Seq: 1, TaskID: 2, Role: RoleHolder, Phase: PhaseProfiling, ProfileRuns: 100, HeartbeatMS: 1000}, "98 01 08 01 02 01 01 64 cd 03 e8"},
		// fixarray(6), 1, 11, task 4, role 2, phase 2, credit 0
		{State{TaskID: 4, Role: RoleWaiter, Phase: PhaseSharing}, "96 01 0b 04 02 02 00"},
		// fixarray(4), 1, 10, task 0, seq 1
		{Hold{Seq: 1}, "94 01 0a 00 01"},
		// fixarray(5), 1, 12, code 1, task 0, fixstr(1) "x"
		{Error{Code: CodeUnknownTask, Message: "x"}, "95 01 0c 01 00 a1 78"},
		// ... str8(32)
		{Error{Code: CodeMalformed, Message: strings.Repeat("y", 32)}, "95 01 0c 03 00 d9 20" + strings.Repeat(" 79", 32)},
		// fixarray(7), 1, 13, task 1, kernel 2, fixstr(1) "k", fixarray(3) [1,2,3], fixarray(3) [uint8 128, uint16 65535, uint32 65536]
		{KernelInfo{TaskID: 1, KernelID: 2, Name: "k", Grid: [3]uint32{1, 2, 3}, Block: [3]uint32{128, 65535, 65536}},
			"97 01 0d 01 02 a1 6b 93 01 02 03 93 cc 80 cd ff ff ce 00 01 00 00"},
		// fixarray(9), 1, 1, seq 1, fixstr(1) "k", pid uint16 4242, priority 5, bin8(16) uuid, fixstr(3) "GPU", flags 0
		{Register{Seq: 1, TaskKey: "k", PID: 4242, Priority: 5, DeviceUUID: [16]byte{15: 1}, DeviceName: "GPU"},
			"99 01 01 01 a1 6b cd 10 92 05 c4 10 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 a3 47 50 55 00"},
	} {
		want := mustHex(t, v.want)
		got, err := Append(nil, v.msg)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Append(%s) = %x, %v\nwant % x", Format(v.msg), got, err, want)
		}
		checkDecodes(t, Format(v.msg), want, v.msg)
	}
}

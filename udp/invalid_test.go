package udp

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

var sentinels = []struct {
	name string
	err  error
}{
	{"ErrTooLarge", ErrTooLarge},
	{"ErrMalformed", ErrMalformed},
	{"ErrVersion", ErrVersion},
	{"ErrUnknownType", ErrUnknownType},
	{"ErrMissingField", ErrMissingField},
	{"ErrRange", ErrRange},
	{"ErrTrailing", ErrTrailing},
}

func sentinelByName(name string) error {
	for _, s := range sentinels {
		if s.name == name {
			return s.err
		}
	}
	return nil
}

type invalidCase struct{ name, hex, err string }

const (
	uuid16   = "000102030405060708090a0b0c0d0e0f"
	u32Over  = "cf0000000100000000" // 2^32
	f64One   = "cb3ff0000000000000" // 1.0
	ackTail  = "64cd03e8"           // profile_runs 100, heartbeat_ms 1000
	grantPre = "95010907cd012c"
)

// maxRec is the largest record encoding: 29 bytes.
var maxRec = "94" + strings.Repeat("cf"+strings.Repeat("ff", 8), 3) + "03"

// invalidCases lists testdata/invalid.txt. Each datagram has one defect.
func invalidCases() []invalidCase {
	var cs []invalidCase
	add := func(name, err string, hexParts ...string) {
		cs = append(cs, invalidCase{name, strings.Join(hexParts, ""), err})
	}
	const (
		malformed = "ErrMalformed"
		version   = "ErrVersion"
		unknown   = "ErrUnknownType"
		missing   = "ErrMissingField"
		rng       = "ErrRange"
		trailing  = "ErrTrailing"
		tooLarge  = "ErrTooLarge"
	)

	// The envelope.
	add("empty", malformed, "")
	add("not_array_int", malformed, "01")
	add("not_array_map", malformed, "810106")
	add("not_array_str", malformed, "a3616263")
	add("not_array_nil", malformed, "c0")
	add("array_empty", missing, "90")
	add("array16_truncated_header", malformed, "dc00")
	add("array_claims_more", malformed, "94010601")
	add("array32_huge", malformed, "ddffffffff010601")
	add("version_only", missing, "9101")
	add("version_0", version, "93000601")
	add("version_2", version, "93020601")
	add("version_2_alone", version, "9102")
	add("version_negative", version, "93ff0601")
	add("version_257", version, "93cd01010601")
	add("version_str", malformed, "93a1310601")
	add("version_nil", malformed, "93c00601")
	add("version_float", malformed, "93"+f64One+"0601")
	add("type_0", unknown, "93010001")
	add("type_127", unknown, "93017f01") // the first type after the table: TestFirstUnknownType
	// KernelTimes: [1, 15, task, bound, default, kernels]
	add("kernel_times_missing_kernels", missing, "950111010203")
	add("kernel_times_kernel_short", missing, "9601110102039191cf0000000000000001")
	add("kernel_times_duration_too_big", rng, "960111010203919201cf0000000100000000")
	add("kernel_times_bound_too_big", rng, "96011101cf00000001000000000390")
	// Calibration: [1, 19, task, seq, host, device, flags]
	add("calibration_flags_4", rng, "9701130102010204")
	add("calibration_missing_flags", missing, "96011301020102")
	// Warm: [1, 20, task, seq, probe_ns]
	add("warm_missing_probe", missing, "9401140102")
	add("warm_probe_too_big", rng, "9501140102"+u32Over)
	// LaunchBatch: [1, 14, task, seq, base, launches]
	add("launch_batch_missing_launches", missing, "95010e010205")
	add("launch_batch_launch_short", missing, "96010e0102059191cf0000000000000001")
	add("launch_batch_offset_too_big", rng, "96010e010205919201cf0000000100000000")
	add("launch_batch_launches_not_array", malformed, "96010e01020501")
	add("launch_batch_negative_offset", rng, "96010e010205919201ff")
	add("type_255", unknown, "9301ccff01")
	add("type_256", unknown, "9301cd010001")
	add("type_negative", unknown, "9301ff01")
	add("type_nil", malformed, "9301c001")
	add("trailing_byte", trailing, "93010601", "00")
	add("trailing_message", trailing, "93010601", "93010601")
	add("too_large_1401", tooLarge, "95010c0300da0571", strings.Repeat("61", 1393))
	add("measurements_48_records", tooLarge, "950104ceffffffffceffffffffdc0030", strings.Repeat(maxRec, 48))
	add("extra_truncated_str", malformed, "94010601", "a56162")
	add("extra_str32_huge", malformed, "94010601", "dbffffffff")
	add("extra_bin32_huge", malformed, "94010601", "c6ffffffff")
	add("extra_map32_huge", malformed, "94010601", "dfffffffff")
	add("extra_array32_huge", malformed, "94010601", "ddffffffff")
	add("extra_ext32_huge", malformed, "94010601", "c9ffffffff01")
	add("extra_code_c1", malformed, "94010601", "c1")
	add("extra_nested_unterminated", malformed, "94010601", strings.Repeat("91", 50))
	add("field_code_c1", malformed, "930106c1")

	// Hook → daemon.
	add("register_missing_hook_flags", missing, "98010101a16b0203c410", uuid16, "a164")
	add("register_priority_10", rng, "99010101a16b020ac410", uuid16, "a16400")
	add("register_weight_101", rng, "9a010101a16b0203c410", uuid16, "a1640065")
	add("register_weight_str", malformed, "9a010101a16b0203c410", uuid16, "a16400a132")
	add("register_uuid_15", rng, "99010101a16b0203c40f", uuid16[:30], "a16400")
	add("register_uuid_17", rng, "99010101a16b0203c411", uuid16, "ff", "a16400")
	add("register_uuid_str", malformed, "99010101a16b0203b0", uuid16, "a16400")
	add("register_key_bin", malformed, "99010101c4016b0203c410", uuid16, "a16400")
	add("register_pid_negative", rng, "99010101a16bd0ff03c410", uuid16, "a16400")
	add("register_key_str32_huge", malformed, "99010101dbffffffff")
	add("launch_notify_missing_kernel", missing, "9401020102")
	add("launch_notify_task_2p32", rng, "950102", u32Over, "0203")
	add("launch_notify_kernel_negative", rng, "9501020102", "d3ffffffffffffffff")
	add("launch_notify_kernel_float", malformed, "9501020102", f64One)
	add("launch_notify_truncated_u64", malformed, "9501020102", "cf0000")
	add("launch_request_seq_nil", malformed, "95010301c003")
	add("measurements_missing_records", missing, "9401040101")
	add("measurements_records_not_array", malformed, "9501040101", "01")
	add("measurements_records_nil", malformed, "9501040101", "c0")
	add("measurements_record_3_elements", missing, "9501040101", "91", "93010203")
	add("measurements_record_flags_4", rng, "9501040101", "91", "9401020304")
	add("measurements_record_flags_255", rng, "9501040101", "91", "94010203ccff")
	add("measurements_record_gap_negative", rng, "9501040101", "91", "940102ff00")
	add("measurements_record_not_array", malformed, "9501040101", "91", "01")
	add("measurements_records_array16_huge", malformed, "9501040101", "dcffff", "9401020300")
	add("run_end_reason_0", rng, "980105010203040007")
	add("run_end_reason_6", rng, "980105010203040607")
	add("run_end_unmeasured_5", rng, "9a01050102030401070005")
	add("run_end_missing_reason", missing, "960105", "01020304")
	add("heartbeat_missing_task", missing, "920106")
	add("heartbeat_task_str", malformed, "930106a131")
	add("goodbye_task_2p32", rng, "930107", u32Over)
	add("kernel_info_grid_2", malformed, "97010d0102a16b", "920102", "93040506")
	add("kernel_info_grid_4", malformed, "97010d0102a16b", "9401020304", "93040506")
	add("kernel_info_grid_not_array", malformed, "97010d0102a16b", "01", "93040506")
	add("kernel_info_block_2p32", rng, "97010d0102a16b", "93010203", "93", u32Over, "0101")
	add("kernel_info_name_bin", malformed, "97010d0102c4016b", "93010203", "93040506")
	add("kernel_info_name_truncated", malformed, "97010d0102a56b")
	add("kernel_info_missing_block", missing, "96010d0102a16b93010203")

	// Daemon → hook (the types the C hook decodes).
	add("register_ack_role_0", rng, "98010801020001", ackTail)
	add("register_ack_role_3", rng, "98010801020301", ackTail)
	add("register_ack_phase_0", rng, "98010801020100", ackTail)
	add("register_ack_phase_3", rng, "98010801020103", ackTail)
	add("register_ack_role_nil", malformed, "9801080102c001", ackTail)
	add("register_ack_missing_heartbeat", missing, "9701080102010164")
	add("register_ack_seq_2p32", rng, "980108", u32Over, "020101", ackTail)
	add("register_ack_heartbeat_negative", rng, "9801080102010164", "d2ffffffff")
	add("register_ack_trailing", trailing, "98010801020101", ackTail, "00")
	add("register_ack_truncated", malformed, "9801080102010164cd03")
	add("register_ack_version_2", version, "98020801020101", ackTail)
	add("grant_missing_credit", missing, "94010907cd012c")
	add("grant_credit_negative", rng, grantPre, "ff")
	add("grant_credit_nil", malformed, grantPre, "c0")
	add("grant_credit_2p32", rng, grantPre, u32Over)
	add("grant_truncated", malformed, "95010907cd01")
	add("grant_trailing", trailing, grantPre, "00", "00")
	add("grant_task_bool", malformed, "950109c3cd012c00")
	add("grant_version_0", version, "95000907cd012c00")
	add("hold_missing_seq", missing, "93010a07")
	add("hold_seq_2p32", rng, "94010a07", u32Over)
	add("hold_seq_float32", malformed, "94010a07", "ca3f800000")
	add("hold_trailing", trailing, "94010a0701", "c0")
	add("state_role_0", rng, "96010b04000200")
	add("state_role_3", rng, "96010b04030200")
	add("state_phase_3", rng, "96010b04020300")
	add("state_credit_2p32", rng, "96010b040202", u32Over)
	add("state_missing_credit", missing, "95010b040202")
	add("state_role_str", malformed, "96010b04a1320200")
	add("error_code_0", rng, "95010c0000a0")
	add("error_code_6", rng, "95010c0600a0")
	add("error_code_255", rng, "95010cccff00a0")
	add("error_message_bin", malformed, "95010c0100c40178")
	add("error_message_nil", malformed, "95010c0100c0")
	add("error_message_truncated", malformed, "95010c0100a56162")
	add("error_message_str32_huge", malformed, "95010c0100dbffffffff")
	add("error_missing_message", missing, "94010c0100")
	add("error_task_negative", rng, "95010c01d0ffa0")
	add("error_trailing", trailing, "95010c0100a0", "a0")
	return cs
}

const invalidHeader = `# fikit wire protocol v1: datagrams every decoder must reject, each with one defect.
# <name> | <hex> | <sentinel>, sentinels as in udp/errors.go: ErrTooLarge, ErrMalformed, ErrVersion,
# ErrUnknownType, ErrMissingField, ErrRange, ErrTrailing. The hex may be empty. Decoders check, in this
# order: size, array header, version, type, element count, fields in order, extra elements, trailing
# bytes. Generated by: go test ./udp -run TestVectors -rewrite
`

func generatedInvalidFile(t testing.TB) string {
	var b strings.Builder
	b.WriteString(invalidHeader)
	for _, c := range invalidCases() {
		if sentinelByName(c.err) == nil {
			t.Fatalf("%s: unknown sentinel %s", c.name, c.err)
		}
		b.WriteString(c.name + " | " + hex.EncodeToString(mustHex(t, c.hex)) + " | " + c.err + "\n")
	}
	return b.String()
}

func TestInvalid(t *testing.T) {
	lines, numbers := dataLines(t, invalidFile)
	if len(lines) != len(invalidCases()) {
		t.Errorf("%s has %d lines, invalidCases %d", invalidFile, len(lines), len(invalidCases()))
	}
	var d Decoder
	for i, line := range lines {
		parts := strings.Split(line, " | ")
		if len(parts) != 3 {
			t.Errorf("line %d: want 3 parts: %q", numbers[i], line)
			continue
		}
		name, b, want := parts[0], mustHex(t, parts[1]), sentinelByName(parts[2])
		if want == nil {
			t.Errorf("line %d: unknown sentinel %q", numbers[i], parts[2])
			continue
		}
		if _, ok := d.fast(b); ok {
			t.Errorf("line %d %s: the fast path accepted it", numbers[i], name)
		}
		for _, dec := range []struct {
			how string
			fn  func([]byte) (Message, error)
		}{{"Decode", Decode}, {"Decoder.Decode", d.Decode}, {"full", d.decodeFull}} {
			m, err := dec.fn(b)
			if err == nil {
				t.Errorf("line %d %s: %s accepted it as %s", numbers[i], name, dec.how, short(Format(m)))
				continue
			}
			if !errors.Is(err, want) {
				t.Errorf("line %d %s: %s: %v, want %s", numbers[i], name, dec.how, err, parts[2])
			}
			for _, s := range sentinels {
				if s.err != want && errors.Is(err, s.err) {
					t.Errorf("line %d %s: %s: %v also wraps %s", numbers[i], name, dec.how, err, s.name)
				}
			}
		}
	}
}

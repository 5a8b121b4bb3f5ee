#!/usr/bin/env bash
# seeds.sh TARGET DIR — write the seed inputs of a C fuzz target
# (hookclient/fuzz/fuzz_TARGET.c) into DIR, from the test vectors the Go and
# C tests share. Run from the repository root; needs perl (Debian's
# perl-base is always there).
set -euo pipefail
target=$1 dir=$2
mkdir -p "$dir"
case $target in
decode)
	# The hex after the last " | " (vectors, decode_only), or between the
	# bars (invalid), one file per datagram.
	perl -ne '
		next if /^#/ || !/\|/;
		my @f = split / \| /; my $hex = $ARGV =~ /invalid/ ? $f[1] : $f[-1];
		$hex =~ s/\s+//g; my ($name) = /^(\S+)/;
		open my $o, ">", "'"$dir"'/$name" or die; binmode $o; print $o pack("H*", $hex); close $o;
	' udp/testdata/vectors.txt udp/testdata/decode_only.txt udp/testdata/invalid.txt
	;;
auth)
	# <name> <direction> <key> <message> <datagram>: direction byte, key
	# length, key, datagram.
	perl -ane '
		next if /^#/ || @F < 5;
		my $dir = $F[1] eq "to_hook" ? 1 : 0; my $key = pack("H*", $F[2]);
		open my $o, ">", "'"$dir"'/$F[0]" or die; binmode $o;
		print $o pack("CC", $dir, length $key), $key, pack("H*", $F[4]); close $o;
	' udp/testdata/auth.txt
	;;
board)
	# Boards laid out by layout.txt: empty, valid with levels and slots in
	# use, and one of another layout. Byte 0 picks generation 1, section 0.
	perl -ane '
		BEGIN { %o = () } next if /^#/; $o{$F[0]} = $F[1];
		END {
			my $d = "'"$dir"'";
			sub board { my ($magic, $ver, $gpus, $gen, $hb) = @_;
				my $b = "\0" x $o{file_size};
				substr($b, $o{magic}, 8) = pack("Q<", $magic);
				substr($b, $o{version}, 4) = pack("L<", $ver);
				substr($b, $o{gpus}, 4) = pack("L<", $gpus);
				substr($b, $o{generation}, 8) = pack("Q<", $gen);
				substr($b, $o{heartbeat_ns}, 8) = pack("Q<", $hb);
				for my $g (0..15) { my $s = $o{header_size} + $g * $o{gpu_stride};
					substr($b, $s + $o{"gpu.uuid"}, 16) = pack("C16", map { $g * 16 + $_ } 0..15);
					for my $p (0..9) { substr($b, $s + $o{"gpu.level_ns"} + 8 * $p, 8) = pack("Q<", $hb - 1000 * $p) }
					substr($b, $s + $o{"gpu.registered"}, 8) = pack("Q<", 0x3ff) }
				for my $t (0..$o{slots} - 1) { my $s = $o{slots_offset} + $t * $o{slot_stride};
					substr($b, $s + $o{"slot.task"}, 4) = pack("L<", $t + 1);
					substr($b, $s + $o{"slot.grant_seq"}, 4) = pack("L<", 7);
					substr($b, $s + $o{"slot.seen_ns"}, 8) = pack("Q<", $hb) }
				return $b }
			my %seeds = (empty => "\0" x $o{file_size},
				valid => board(0x31444254494b4946, 1, 16, 1, 5e9),
				stale => board(0x31444254494b4946, 1, 16, 1, 1),
				wrap => board(0x31444254494b4946, 1, 16, 1, 0xffffffffffffff00),
				other_layout => board(0x31444254494b4946, 2, 8, 1, 5e9));
			for (keys %seeds) { open my $f, ">", "$d/$_" or die; binmode $f; print $f "\0", $seeds{$_}; close $f }
		}
	' udp/board/testdata/layout.txt
	;;
config)
	# Values in the order of fuzz_config.c, NUL-separated; the task keys
	# of kernelid/testdata/task_keys.tsv (first argv element) among them.
	# Hand-written ones: values separated by "|" here.
	i=0
	for v in '127.0.0.1:7070' '[::1]:7070|0' 'host:0|12' '::1:7070|-1' 'a:65536|9' \
		'|||debug|yes|1|10000|off|16|/etc/fikit.key' '|||warning|perhaps|60001|0|maybe|17|' \
		'x:1|5|key|loud|0| 1| 1|on|0|' '[v6]:1|007|||||||||'; do
		printf '%s' "$v" | tr '|' '\000' > "$dir/hand-$i"; i=$((i + 1))
	done
	perl -ne '
		next if /^#/; chomp; my @f = split /\t/; my $k = $f[1] // "";
		$k =~ s/\\x([0-9a-fA-F]{2})/chr hex $1/ge; $k =~ s/\\t/\t/g; $k =~ s/\\n/\n/g; $k =~ s/\\\\/\\/g;
		open my $o, ">", "'"$dir"'/task_key-$." or die; binmode $o; print $o "\0\0", $k; close $o;
	' kernelid/testdata/task_keys.tsv
	;;
*)
	echo "seeds.sh: unknown target $target" >&2
	exit 2
	;;
esac

package kernelid

import (
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// DisplayName returns the name of a kernel as people should read it:
//
//   - a replayer entry name (see [ReplayEntryName]) is turned back into the
//     trace's name, which is then treated like any other name;
//   - an Itanium-mangled C++ name ("_Z…") is demangled without the function's
//     parameter list and return type, keeping template arguments, since those
//     tell template instantiations apart while the parameters mostly repeat
//     them ("at::native::vectorized_elementwise_kernel<4, at::native::
//     FillFunctor<float>, std::array<char*, 1ul> >");
//   - anything else, including names that fail to demangle and graph names,
//     is returned as it is.
//
// The result may still be long; callers that print tables cut it themselves.
func DisplayName(name string) string {
	if orig, ok := ReplayOriginalName(name); ok {
		name = orig
	}
	if !strings.HasPrefix(name, "_Z") {
		return name
	}
	return demangleName(name)
}

// maxDemangledPow bounds the demangled length to 2^14 bytes.
const maxDemangledPow = 14

func demangleName(name string) (out string) {
	// Names come from arbitrary processes over the wire; a demangler bug must
	// not take down the daemon or the CLI.
	defer func() {
		if recover() != nil {
			out = name
		}
	}()
	s, err := demangle.ToString(name, demangle.NoParams, demangle.MaxLength(maxDemangledPow))
	if err != nil || s == "" {
		return name
	}
	return s
}

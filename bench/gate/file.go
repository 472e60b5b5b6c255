package gate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// decoder decodes fastpath.io/v1alpha1 objects from YAML or JSON strictly:
// an unknown or duplicate field is an error, as kubectl's default
// server-side field validation would make it, rather than a criterion
// silently dropped by a typo.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	utilruntime.Must(fastpathv1alpha1.AddToScheme(s))
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

// DecodeBenchmark reads the one FastPathBenchmark of r (YAML or JSON; YAML
// documents that are empty or only comments are skipped). Errors name what
// is wrong: another kind, several objects, an unknown field.
func DecodeBenchmark(r io.Reader) (*fastpathv1alpha1.FastPathBenchmark, error) {
	docs := yaml.NewYAMLReader(bufio.NewReader(r))
	var found *fastpathv1alpha1.FastPathBenchmark
	for n := 1; ; n++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read YAML document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		// A strict decoding error comes with the object decoded: the kind
		// is the first thing to be wrong about.
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil && !runtime.IsStrictDecodingError(err) {
			return nil, fmt.Errorf("failed to decode document %d: %w", n, err)
		}
		b, ok := obj.(*fastpathv1alpha1.FastPathBenchmark)
		if !ok {
			return nil, fmt.Errorf("document %d is a %s, not a FastPathBenchmark", n, gvk.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to decode document %d: %w", n, err)
		}
		if found != nil {
			return nil, fmt.Errorf("document %d is a second FastPathBenchmark: bench run takes one", n)
		}
		found = b
	}
	if found == nil {
		return nil, errors.New("no FastPathBenchmark in it")
	}
	return found, nil
}

// stripComments drops the lines of a YAML document that are comments.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

// Namespace is where a benchmark of file namespace fileNS goes: fileNS, or
// current (the namespace of -n, else the kubeconfig context's) when the
// file names none. -n (flagNS, "" when not given) naming another namespace
// than the file is an error, as for kubectl create.
func Namespace(fileNS, flagNS, current string) (string, error) {
	switch {
	case fileNS == "":
		return current, nil
	case flagNS != "" && flagNS != fileNS:
		return "", fmt.Errorf("the file's metadata.namespace %s and -n %s differ: drop one of them", fileNS, flagNS)
	}
	return fileNS, nil
}

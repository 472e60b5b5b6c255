package images

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The Dockerfile at the repository root is the one recipe of Fastpath's
// images: `docker build --target <stage>` follows it where a Docker engine
// exists, and Targets reads it here, so what an image carries, where, as which
// user and with which entrypoint is written once. What the builder knows on
// its own is only what stands in for each base image (the stand-ins below)
// and the pause image, which is Kubernetes' recipe, not ours.

// Stage is what the builder reads of one Dockerfile stage.
type Stage struct {
	// Name is the stage's name (FROM <image> AS <Name>).
	Name string
	// From is the base as written, e.g. "${CC_IMAGE}".
	From string
	// Platform is FROM's --platform ("" when none), e.g. "$BUILDPLATFORM".
	Platform string
	// Copies are its COPY --from=<stage> <src> <dst> lines, in order.
	Copies [][3]string
	// User is its USER ("" when it has none).
	User string
	// Entrypoint is its ENTRYPOINT (exec form); nil when it has none.
	Entrypoint []string
	// Runs are its RUN lines, continuation lines joined.
	Runs []string
}

// Dockerfile is what the builder reads of the repository's Dockerfile.
type Dockerfile struct {
	// Args are the global ARG defaults (those before the first FROM), unexpanded.
	Args map[string]string
	// Stages are the stages in file order.
	Stages []*Stage
}

// ParseDockerfile reads the instructions this repository's Dockerfile uses:
// line continuations, comments, ARG, FROM ... AS, COPY, USER, ENTRYPOINT
// (exec form only) and RUN. Anything else is an error that quotes the
// instruction, so a new instruction is a decision, not a silent drift.
func ParseDockerfile(text string) (*Dockerfile, error) {
	df := &Dockerfile{Args: map[string]string{}}
	var lines []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") || (t == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		lines = append(lines, cur+t)
		cur = ""
	}
	var st *Stage
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		f := strings.Fields(rest)
		op := strings.ToUpper(instr)
		if st == nil && op != "ARG" && op != "FROM" {
			return nil, fmt.Errorf("Dockerfile: %s before the first FROM", op)
		}
		switch op {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			if st == nil {
				df.Args[k] = v
			}
		case "FROM":
			platform := ""
			if len(f) > 0 {
				if p, ok := strings.CutPrefix(f[0], "--platform="); ok {
					platform, f = p, f[1:]
				}
			}
			if len(f) != 3 || !strings.EqualFold(f[1], "AS") {
				return nil, fmt.Errorf("Dockerfile: FROM %q: want FROM [--platform=<platform>] <image> AS <name>", rest)
			}
			st = &Stage{Name: f[2], From: f[0], Platform: platform}
			df.Stages = append(df.Stages, st)
		case "COPY":
			if from, ok := strings.CutPrefix(f[0], "--from="); ok {
				if len(f) != 3 {
					return nil, fmt.Errorf("Dockerfile: stage %s: COPY %q: want COPY --from=<stage> <src> <dst>", st.Name, rest)
				}
				st.Copies = append(st.Copies, [3]string{from, f[1], f[2]})
			}
		case "USER":
			st.User = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &st.Entrypoint); err != nil {
				return nil, fmt.Errorf("Dockerfile: stage %s: ENTRYPOINT %q: want the exec form: %w", st.Name, rest, err)
			}
		case "RUN":
			st.Runs = append(st.Runs, rest)
		case "WORKDIR":
		default:
			return nil, fmt.Errorf("Dockerfile: stage %s: %s is not an instruction the daemonless build reads (e2e/localenv/images/dockerfile.go)", st.Name, op)
		}
	}
	return df, nil
}

// stage returns the stage named name, or nil.
func (df *Dockerfile) stage(name string) *Stage {
	for _, s := range df.Stages {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// expand replaces ${ARG} with the global ARG defaults.
func (df *Dockerfile) expand(s string) string {
	return os.Expand(s, func(k string) string { return df.Args[k] })
}

// standIns are the bases the builder can assemble, keyed by the Dockerfile ARG
// that names the real base image.
var standIns = []Base{baseCC, baseStaticNonroot, baseBench, baseSidecarShim}

// goBuildFlags are the flags of every Go build in the Dockerfile's build
// stage, and of the builder's buildGo.
var goBuildFlags = []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w"`}

// crateStage matches a stage that fetches and patches a crate with
// hack/<crate>/source.sh <version> /src/<crate>.
var crateStage = regexp.MustCompile(`bash /src/hack/([a-z0-9-]+)/source\.sh (\S+) /src/([a-z0-9-]+)`)

// TargetsFromDockerfile returns the images the Dockerfile's text describes:
// one Target per stage with an ENTRYPOINT, in file order. Errors name the
// stage and what the builder cannot follow: a base without a stand-in, or
// whose ARG names another image than the stand-in's; a COPY of a file no
// stage builds; a Go build without the builder's flags; a nonroot USER on a
// base without that user; a KUBEVIRT_VERSION other than KubeVirtVersion; a
// stage that is neither an image nor copied from.
func TargetsFromDockerfile(text string) ([]Target, error) {
	df, err := ParseDockerfile(text)
	if err != nil {
		return nil, err
	}
	var errs []string
	report := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if v := df.Args["KUBEVIRT_VERSION"]; v != KubeVirtVersion {
		report("ARG KUBEVIRT_VERSION=%s, but the builder builds KubeVirt's sidecar-shim %s (KubeVirtVersion)", v, KubeVirtVersion)
	}
	build := df.stage("build")
	if build == nil {
		return nil, fmt.Errorf("Dockerfile: no stage build (the Go binaries)")
	}
	buildRun := strings.Join(build.Runs, "\n")
	for _, flag := range goBuildFlags {
		if !strings.Contains(buildRun, flag) {
			report("stage build: no %s (the builder's buildGo uses it)", flag)
		}
	}
	// The Go stage may run on the builder's platform only if it cross-compiles
	// for the image's; any other stage on another platform than its image's
	// would put the builder's binaries into it.
	for _, s := range df.Stages {
		switch {
		case s.Platform == "":
		case s.Name != "build":
			report("stage %s: FROM --platform=%s: only the Go stage build may run on another platform than the image's", s.Name, s.Platform)
		case s.Platform != "$BUILDPLATFORM" && s.Platform != "${BUILDPLATFORM}":
			report("stage build: FROM --platform=%s: want $BUILDPLATFORM", s.Platform)
		case !strings.Contains(buildRun, "GOOS=${TARGETOS}") || !strings.Contains(buildRun, "GOARCH=${TARGETARCH}"):
			report("stage build: FROM --platform=$BUILDPLATFORM without GOOS=${TARGETOS} GOARCH=${TARGETARCH}: every image would get the builder's architecture")
		}
	}
	used := map[string]bool{"build": true}
	var targets []Target
	for _, s := range df.Stages {
		if s.Entrypoint == nil {
			continue
		}
		used[s.Name] = true
		t := Target{Name: s.Name, Ref: componentRef(s.Name), Stage: s.Name, User: s.User, Entrypoint: s.Entrypoint}
		arg, ok := strings.CutPrefix(s.From, "${")
		arg, ok2 := strings.CutSuffix(arg, "}")
		i := slices.IndexFunc(standIns, func(b Base) bool { return b.FromArg == arg })
		if !ok || !ok2 || i < 0 {
			report("stage %s: FROM %s: the builder has a stand-in only for FROM ${<ARG>} with ARG one of CC_IMAGE, STATIC_NONROOT_IMAGE, BENCH_BASE_IMAGE, SIDECAR_SHIM_IMAGE", s.Name, s.From)
			continue
		}
		t.Base = standIns[i]
		if def, ok := df.Args[arg]; !ok {
			report("stage %s: no ARG %s (its base)", s.Name, arg)
		} else if image, _, _ := strings.Cut(df.expand(def), "@"); image != t.Base.Image {
			report("stage %s: ARG %s=%s, but the builder's %s base stands in for %s", s.Name, arg, image, t.Base.Name, t.Base.Image)
		}
		var apt []string
		for _, r := range s.Runs {
			apt = append(apt, aptInstalled(r)...)
		}
		if apt != nil {
			t.Base.Debs = apt
		}
		if t.User == fmt.Sprintf("%d:%d", NonrootUID, NonrootUID) && t.Base.User == "" &&
			!strings.Contains(strings.Join(s.Runs, "\n"), fmt.Sprintf("useradd --uid %d", NonrootUID)) {
			// ssh fails with "No user exists for uid 65532" on a base without it.
			report("stage %s: USER %s on a base without that user and no useradd --uid %d", s.Name, t.User, NonrootUID)
		}
		for _, c := range s.Copies {
			name, ok := strings.CutPrefix(c[1], "/out/")
			if !ok {
				report("stage %s: COPY --from=%s %s: the builder copies only /out/<binary>", s.Name, c[0], c[1])
				continue
			}
			b := Binary{Name: name, Path: c[2]}
			if c[0] != "build" {
				used[c[0]] = true
				src := df.stage(c[0])
				if src == nil {
					report("stage %s: COPY --from=%s: no such stage", s.Name, c[0])
					continue
				}
				run := df.expand(strings.Join(src.Runs, "\n"))
				m := crateStage.FindStringSubmatch(run)
				if m == nil || m[1] != m[3] || !strings.Contains(run, "cargo install --locked --path /src/"+m[1]) || !strings.Contains(run, "/out/"+name) {
					report("stage %s: stage %s does not run bash /src/hack/<crate>/source.sh <version> /src/<crate> and cargo install --locked --path /src/<crate> into /out/%s", s.Name, src.Name, name)
					continue
				}
				b.Crate, b.Version, b.From, b.Prebuilt = m[1], m[2], c[0], filepath.Join("bin", name)
				t.Binaries = append(t.Binaries, b)
				continue
			}
			b.Package = goPackage(buildRun, name)
			if b.Package == "" {
				report("stage %s: the build stage does not build /out/%s", s.Name, name)
				continue
			}
			t.Binaries = append(t.Binaries, b)
		}
		targets = append(targets, t)
	}
	for _, s := range df.Stages {
		if !used[s.Name] {
			report("stage %s: neither an image (no ENTRYPOINT) nor copied from", s.Name)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("the Dockerfile describes images the daemonless build cannot follow:\n  %s", strings.Join(errs, "\n  "))
	}
	return targets, nil
}

// goPackage returns the Go package the build stage's RUN builds into
// /out/<name>: either `-o /out/<name> <package>` or the loop
// `for b in <names>; do ... -o /out/$b ./cmd/$b; done`. "" when neither.
func goPackage(run, name string) string {
	if m := regexp.MustCompile(`-o /out/` + regexp.QuoteMeta(name) + ` (\./\S+)`).FindStringSubmatch(run); m != nil {
		return strings.TrimSuffix(m[1], ";")
	}
	for _, m := range regexp.MustCompile(`for b in ([^;]+); do`).FindAllStringSubmatch(run, -1) {
		if slices.Contains(strings.Fields(m[1]), name) && strings.Contains(run, "-o /out/$b ./cmd/$b") {
			return "./cmd/" + name
		}
	}
	return ""
}

// aptInstalled returns the packages of an `apt-get install` in run.
func aptInstalled(run string) []string {
	_, after, ok := strings.Cut(run, "apt-get install")
	if !ok {
		return nil
	}
	var pkgs []string
	for _, w := range strings.Fields(after) {
		if w == "&&" || w == ";" {
			break
		}
		if !strings.HasPrefix(w, "-") {
			pkgs = append(pkgs, w)
		}
	}
	return pkgs
}

package images

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// NonrootUID is distroless's nonroot user and group, which the operator and
// bench stages run as (USER 65532:65532).
const NonrootUID = 65532

// baseFiles returns the files every image with a base has: /etc/passwd and
// /etc/group (root, nobody, nonroot 65532 and base.ExtraUsers, as distroless
// writes them), /tmp (1777), /root, the home directories, and the CA bundle
// CACertFile concatenated from the ca-certificates package's tree caTree in
// the order update-ca-certificates uses (sorted paths).
func baseFiles(base Base, caTree string) ([]File, error) {
	users := append([]User{{Name: "nonroot", ID: NonrootUID, Home: "/home/nonroot"}}, base.ExtraUsers...)
	var passwd, group strings.Builder
	passwd.WriteString("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")
	group.WriteString("root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\n")
	files := []File{
		Dir("/tmp", 0o777|fs.ModeSticky),
		Dir("/root", 0o700),
		Dir("/etc/ssl/certs", 0o755),
	}
	for _, u := range users {
		fmt.Fprintf(&passwd, "%s:x:%d:%d:%s:%s:/sbin/nologin\n", u.Name, u.ID, u.ID, u.Name, u.Home)
		fmt.Fprintf(&group, "%s:x:%d:\n", u.Name, u.ID)
		files = append(files, File{Path: u.Home, Mode: fs.ModeDir | 0o700, UID: u.ID, GID: u.ID})
	}
	files = append(files,
		Content("/etc/passwd", 0o644, []byte(passwd.String())),
		Content("/etc/group", 0o644, []byte(group.String())),
	)
	bundle, err := caBundle(caTree)
	if err != nil {
		return nil, err
	}
	files = append(files, Content(CACertFile, 0o644, bundle))
	if c := filepath.Join(caTree, "usr/share/doc/ca-certificates/copyright"); fileExists(c) {
		files = append(files, Copy(c, "/usr/share/doc/ca-certificates/copyright", 0o644))
	}
	return files, nil
}

// caBundle concatenates the certificates under <tree>/usr/share/ca-certificates
// (every *.crt, sorted), each ending in a newline, as update-ca-certificates
// does with Debian's default /etc/ca-certificates.conf (all of them enabled).
func caBundle(tree string) ([]byte, error) {
	dir := filepath.Join(tree, "usr/share/ca-certificates")
	var crts []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".crt") {
			crts = append(crts, p)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read the CA certificates in %s: %w", dir, err)
	}
	if len(crts) == 0 {
		return nil, fmt.Errorf("failed to build %s: no *.crt under %s", CACertFile, dir)
	}
	sort.Strings(crts)
	var buf bytes.Buffer
	for _, c := range crts {
		b, err := os.ReadFile(c)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
		if !bytes.HasSuffix(b, []byte("\n")) {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes(), nil
}

// packageFiles returns the files of the unpacked packages for an image layer:
// their trees without manual pages, info pages, lintian overrides and
// documentation other than copyright files (what Debian's slim images drop),
// plus /var/lib/dpkg/status.d/<package> with each control paragraph (as
// distroless records its packages, so scanners can list them).
func packageFiles(pkgs []Package) ([]File, error) {
	var files []File
	for _, p := range pkgs {
		tree, err := TreeFiles(p.Tree)
		if err != nil {
			return nil, err
		}
		for _, f := range tree {
			if dropped(f.Path) {
				continue
			}
			files = append(files, f)
		}
		files = append(files, Content("/var/lib/dpkg/status.d/"+p.Name, 0o644, p.Control))
	}
	return files, nil
}

func dropped(p string) bool {
	for _, pre := range []string{"/usr/share/man/", "/usr/share/info/", "/usr/share/lintian/"} {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(p, "/usr/share/doc/"); ok {
		_, file, nested := strings.Cut(rest, "/")
		return nested && file != "copyright"
	}
	return false
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the modification time of every file and the creation time of every
// image built here (the Unix epoch, as distroless and ko use), so the same
// inputs give the same digests.
var Epoch = time.Unix(0, 0).UTC()

// File is one entry of a layer.
type File struct {
	// Path is the absolute path in the image, e.g. "/usr/local/bin/fastpath-agent".
	Path string
	// Mode is the permission bits plus the type: 0 type bits for a regular file,
	// fs.ModeDir for a directory, fs.ModeSymlink for a symbolic link.
	Mode fs.FileMode
	// UID and GID own the entry (0 is root).
	UID, GID int
	// Src is the host file whose content a regular file gets; when empty, Data is.
	Src string
	// Data is the content of a regular file without Src.
	Data []byte
	// Link is the target of a symbolic link.
	Link string
	// Xattrs are extended attributes, written as PAX records SCHILY.xattr.<name>
	// (what containerd and runc unpack), e.g. "security.capability" from FileCaps.
	Xattrs map[string]string
}

// Dir returns a directory entry owned by root.
func Dir(p string, perm fs.FileMode) File { return File{Path: p, Mode: fs.ModeDir | perm} }

// Copy returns a regular file with the content of host file src, owned by root.
func Copy(src, dst string, perm fs.FileMode) File { return File{Path: dst, Mode: perm, Src: src} }

// Content returns a regular file holding data, owned by root.
func Content(dst string, perm fs.FileMode, data []byte) File {
	return File{Path: dst, Mode: perm, Data: data}
}

// Tar writes files as a tar stream with parents before children, every
// missing parent directory added (0755, root), every time set to Epoch and the
// entries sorted by path, so equal inputs give equal bytes. A path given twice
// is an error unless both are directories (the first one's mode wins).
func Tar(w io.Writer, files []File) error {
	byPath := map[string]File{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if p == "/" {
			continue
		}
		f.Path = p
		if old, ok := byPath[p]; ok {
			if old.Mode.IsDir() && f.Mode.IsDir() {
				continue
			}
			return fmt.Errorf("failed to lay out %s: given twice", p)
		}
		byPath[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = Dir(d, 0o755)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		if err := writeEntry(tw, byPath[p]); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, f File) error {
	name := strings.TrimPrefix(f.Path, "/")
	hdr := &tar.Header{
		Name: name, Mode: int64(f.Mode.Perm()), Uid: f.UID, Gid: f.GID,
		ModTime: Epoch, Format: tar.FormatPAX,
	}
	for k, v := range f.Xattrs {
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords["SCHILY.xattr."+k] = v
	}
	if f.Mode&fs.ModeSetuid != 0 {
		hdr.Mode |= 0o4000
	}
	if f.Mode&fs.ModeSetgid != 0 {
		hdr.Mode |= 0o2000
	}
	if f.Mode&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	switch {
	case f.Mode.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		return tw.WriteHeader(hdr)
	case f.Mode&fs.ModeSymlink != 0:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Link
		return tw.WriteHeader(hdr)
	case f.Mode.IsRegular():
	default:
		return fmt.Errorf("failed to lay out %s: unsupported file type %v", f.Path, f.Mode.Type())
	}
	data := f.Data
	if f.Src != "" {
		var err error
		if data, err = os.ReadFile(f.Src); err != nil {
			return fmt.Errorf("failed to read %s for %s: %w", f.Src, f.Path, err)
		}
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("failed to write %s: %w", f.Path, err)
	}
	_, err := tw.Write(data)
	return err
}

// Layer returns an OCI layer (gzip, media type types.OCILayer) of files, laid
// out by Tar, compressed once. The uncompressed tar (and the compressed one) is held in memory: the largest layer here
// (the bench image's Debian packages) is tens of MiB.
func Layer(files []File) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := Tar(&buf, files); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// TreeFiles returns the entries under host directory root (e.g. a `dpkg -x`
// tree) as Files at the same paths below "/", owned by root; regular files
// keep their permission bits and point at their host copy (hard links become
// copies). The root directory itself is not returned.
func TreeFiles(root string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := File{Path: "/" + filepath.ToSlash(rel), Mode: info.Mode()}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if f.Link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			f.Src = p
		case info.IsDir():
		default:
			return fmt.Errorf("failed to take %s: unsupported file type %v", p, info.Mode().Type())
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to walk %s: %w", root, err)
	}
	return files, nil
}

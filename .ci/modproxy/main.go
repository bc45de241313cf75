// Command modproxy lays out a module proxy, a directory that the go command
// reads through GOPROXY=file://DIR, serving modules of this checkout at one
// version, as the proxy would serve them once that version is tagged. CI's
// consumer check (.ci/consumer) builds a user's module against it.
//
//	go run . -out DIR -version v0.1.0 -time 2026-12-01T00:00:00Z MODDIR...
//
// For each module directory it writes, under DIR/<module path>/@v/, the
// files of the GOPROXY protocol: list, VERSION.info, VERSION.mod (the
// module's go.mod) and VERSION.zip. The zip follows the module zip format
// (golang.org/x/mod/zip, which this program follows with the standard
// library only): every file under "<module path>@<version>/"; the files git
// would commit (tracked, or untracked and not ignored), or every file when
// the directory is not in a git work tree; left out, as the go command leaves
// them out, the directories of nested modules (those with a go.mod of their
// own), vendored packages, .hg_archival.txt, symbolic links and irregular
// files. A file the format rejects (a path it does not allow, two paths that
// differ only in case, a go.mod or LICENSE over 16 MiB, 500 MiB in all) is an
// error, as it would make the tagged version fail to download; the go command
// checks the zip again when it extracts it.
package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The module zip format's limits.
const (
	maxZipFile = 500 << 20 // the module's files, in all
	maxGoMod   = 16 << 20
	maxLICENSE = 16 << 20
)

var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func main() {
	out := flag.String("out", "", "the proxy's directory (created)")
	version := flag.String("version", "", "the version to serve, such as v0.1.0")
	when := flag.String("time", "", "the version's time, RFC 3339 (the .info file's Time)")
	flag.Parse()
	t, err := time.Parse(time.RFC3339, *when)
	if *out == "" || !semver.MatchString(*version) || err != nil || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -out DIR -version vX.Y.Z -time RFC3339 MODDIR...")
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		if err := serve(*out, dir, *version, t.UTC()); err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %s: %v\n", dir, err)
			os.Exit(1)
		}
	}
}

// serve writes the proxy's files for the module in dir at version.
func serve(out, dir, version string, t time.Time) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	modPath, err := modulePath(gomod)
	if err != nil {
		return err
	}
	names, err := listFiles(dir)
	if err != nil {
		return err
	}
	files, omitted, err := selectFiles(dir, names)
	if err != nil {
		return err
	}
	var zbuf bytes.Buffer
	if err := writeZip(&zbuf, dir, modPath+"@"+version+"/", files); err != nil {
		return err
	}
	escPath, err := escape(modPath)
	if err != nil {
		return err
	}
	escVersion, err := escape(version)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"list":               []byte(version + "\n"),
		escVersion + ".info": info,
		escVersion + ".mod":  gomod,
		escVersion + ".zip":  zbuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "modproxy: %s@%s: %d files, %d B zipped; left out: %s\n",
		modPath, version, len(files), zbuf.Len(), summary(omitted))
	return nil
}

// modulePath returns the path a go.mod file's module directive names.
func modulePath(gomod []byte) (string, error) {
	for line := range strings.Lines(string(gomod)) {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "module" {
			continue
		}
		p := f[1]
		if strings.HasPrefix(p, `"`) || strings.HasPrefix(p, "`") {
			var err error
			if p, err = strconv.Unquote(p); err != nil {
				return "", fmt.Errorf("go.mod: module %s: %v", f[1], err)
			}
		}
		return p, nil
	}
	return "", errors.New("go.mod: no module directive")
}

// listFiles returns the slash-separated paths, relative to dir, of the files
// that git would commit there, or of every file under dir (but for version
// control directories) when dir is not in a git work tree.
func listFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		return strings.FieldsFunc(string(out), func(r rune) bool { return r == 0 }), nil
	}
	inside := exec.Command("git", "rev-parse", "--is-inside-work-tree")
	inside.Dir = dir
	if yes, _ := inside.Output(); strings.TrimSpace(string(yes)) == "true" {
		return nil, fmt.Errorf("git ls-files: %v: %s", err, stderr.Bytes())
	}
	var names []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".bzr", ".git", ".hg", ".svn":
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	return names, err
}

// selectFiles returns the files that go in the module's zip, sorted, and
// the number left out for each reason; or the first file the format rejects.
func selectFiles(dir string, names []string) (files []string, omitted map[string]int, err error) {
	omitted = make(map[string]int)
	// Directories holding a go.mod of their own (other than the root) are
	// other modules.
	nested := make(map[string]bool)
	for _, p := range names {
		d, base := path.Split(p)
		if d != "" && strings.EqualFold(base, "go.mod") {
			if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); err == nil && fi.Mode().IsRegular() {
				nested[d] = true
			}
		}
	}
	inNested := func(p string) bool {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if nested[d+"/"] {
				return true
			}
		}
		return false
	}
	seen := make(map[string]string) // lower-cased path of each file and directory: its path
	total := int64(0)
	for _, p := range names {
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p)))
		switch {
		case errors.Is(err, fs.ErrNotExist): // tracked by git but deleted
			continue
		case err != nil:
			return nil, nil, err
		case p != path.Clean(p) || path.IsAbs(p):
			return nil, nil, fmt.Errorf("%s: path not clean and relative", p)
		case vendored(p):
			omitted["vendored"]++
			continue
		case inNested(p):
			omitted["nested modules"]++
			continue
		case p == ".hg_archival.txt":
			omitted[p]++
			continue
		}
		if err := checkFilePath(p); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", p, err)
		}
		if strings.EqualFold(p, "go.mod") && p != "go.mod" {
			return nil, nil, fmt.Errorf("%s: go.mod files must have lowercase names", p)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			omitted["symbolic links"]++
			continue
		}
		if !fi.Mode().IsRegular() {
			omitted["irregular files"]++
			continue
		}
		if err := collide(seen, p); err != nil {
			return nil, nil, err
		}
		if (p == "go.mod" && fi.Size() > maxGoMod) || (p == "LICENSE" && fi.Size() > maxLICENSE) {
			return nil, nil, fmt.Errorf("%s: %d bytes, more than the format allows", p, fi.Size())
		}
		if total += fi.Size(); total > maxZipFile {
			return nil, nil, fmt.Errorf("the module's files are over %d bytes", maxZipFile)
		}
		files = append(files, p)
	}
	slices.Sort(files)
	return files, omitted, nil
}

// vendored reports whether p is in a vendored package, as the module zip
// format reads it for modules at go 1.24 or later.
func vendored(p string) bool {
	if p == "vendor/modules.txt" {
		return true
	}
	var rest string
	if r, ok := strings.CutPrefix(p, "vendor/"); ok {
		rest = r
	} else if i := strings.Index(p, "/vendor/"); i >= 0 {
		rest = p[i+len("/vendor/"):]
	} else {
		return false
	}
	return strings.Contains(rest, "/")
}

// collide records file p and its directories in seen, by lower-cased path,
// and reports two paths that differ only in case, or a file that is also a
// directory.
func collide(seen map[string]string, p string) error {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		k := strings.ToLower(d) + "/"
		if other, ok := seen[k]; ok && other != d+"/" {
			return fmt.Errorf("%s: directory %s collides with %s", p, d, other)
		}
		if other, ok := seen[strings.ToLower(d)]; ok {
			return fmt.Errorf("%s: directory %s is also the file %s", p, d, other)
		}
		seen[k] = d + "/"
	}
	k := strings.ToLower(p)
	if other, ok := seen[k]; ok {
		return fmt.Errorf("%s: collides with %s", p, other)
	}
	if other, ok := seen[k+"/"]; ok {
		return fmt.Errorf("%s: file is also the directory %s", p, other)
	}
	seen[k] = p
	return nil
}

// checkFilePath reports a path the module zip format does not allow
// (golang.org/x/mod/module.CheckFilePath).
func checkFilePath(p string) error {
	if !utf8.ValidString(p) {
		return errors.New("invalid UTF-8")
	}
	if p == "" || strings.Contains(p, "//") || strings.HasSuffix(p, "/") {
		return errors.New("empty path element")
	}
	for _, elem := range strings.Split(p, "/") {
		if strings.Count(elem, ".") == len(elem) {
			return fmt.Errorf("invalid path element %q", elem)
		}
		if strings.HasSuffix(elem, ".") {
			return errors.New("trailing dot in path element")
		}
		for _, r := range elem {
			if !fileNameOK(r) {
				return fmt.Errorf("invalid char %q", r)
			}
		}
		short, _, _ := strings.Cut(elem, ".")
		for _, bad := range badWindowsNames {
			if strings.EqualFold(bad, short) {
				return fmt.Errorf("%q disallowed as path element component on Windows", short)
			}
		}
	}
	return nil
}

func fileNameOK(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' ||
			strings.ContainsRune("!#$%&()+,-.=@[]^_{}~ ", r)
	}
	return unicode.IsLetter(r)
}

var badWindowsNames = []string{
	"CON", "PRN", "AUX", "NUL",
	"COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8", "COM9",
	"LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
}

// writeZip writes files, read from dir, to w as a zip whose names start with
// prefix.
func writeZip(w *bytes.Buffer, dir, prefix string, files []string) error {
	zw := zip.NewWriter(w)
	for _, p := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		f, err := zw.Create(prefix + p)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
	}
	return zw.Close()
}

// escape returns a module path or version as the proxy protocol spells it:
// each upper-case letter as '!' and the letter in lower case.
func escape(s string) (string, error) {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '!' || r >= utf8.RuneSelf:
			return "", fmt.Errorf("%q: cannot be escaped for a proxy", s)
		case 'A' <= r && r <= 'Z':
			b.WriteByte('!')
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

// summary lists the files left out, by reason.
func summary(omitted map[string]int) string {
	if len(omitted) == 0 {
		return "none"
	}
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(omitted)) {
		parts = append(parts, fmt.Sprintf("%d (%s)", omitted[reason], reason))
	}
	return strings.Join(parts, ", ")
}

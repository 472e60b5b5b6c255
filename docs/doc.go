// Package docs holds no code. architecture_test.go checks the layers of
// architecture.md with go list, and that no shipped binary links the harness.
// links_test.go parses every Markdown
// file of the repository with goldmark and fails on a relative link whose
// target is not in the repository, or whose #anchor names no heading of the
// target file (GitHub's heading IDs), so that README.md and docs/ stand on
// their own in a clone.
package docs

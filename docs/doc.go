// Package docs holds no code: its test (links_test.go) parses every Markdown
// file of the repository with goldmark and fails on a relative link whose
// target is not in the repository, or whose #anchor names no heading of the
// target file (GitHub's heading IDs), so that README.md and docs/ stand on
// their own in a clone.
package docs

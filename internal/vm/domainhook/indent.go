package domainhook

import (
	"strings"

	"github.com/beevik/etree"
)

// childOrNew returns parent's first child element named tag, appending a new
// one (indented like its siblings) when there is none.
func childOrNew(parent *etree.Element, tag string) *etree.Element {
	if el := parent.SelectElement(tag); el != nil && el.Space == "" {
		return el
	}
	el := etree.NewElement(tag)
	appendChild(parent, el)
	return el
}

// appendChild adds child after parent's last child element. In a pretty-printed
// document the new element gets its own line with the last sibling's
// indentation; an element without child elements is opened up with one more
// level of indentation than its own (the step between it and its parent, or a
// tab). In a document on one line nothing but the element is added.
func appendChild(parent, child *etree.Element) {
	if kids := parent.ChildElements(); len(kids) > 0 {
		last := kids[len(kids)-1]
		at := last.Index() + 1
		if indent, ok := lineIndent(last); ok {
			parent.InsertChildAt(at, etree.NewText("\n"+indent))
			at++
		}
		parent.InsertChildAt(at, child)
		return
	}
	indent, ok := lineIndent(parent)
	if !ok || strings.TrimSpace(parent.Text()) != "" {
		parent.AddChild(child)
		return
	}
	for i := len(parent.Child) - 1; i >= 0; i-- {
		if isBlank(parent.Child[i]) {
			parent.RemoveChildAt(i)
		}
	}
	parent.AddChild(etree.NewText("\n" + indent + indentStep(parent, indent)))
	parent.AddChild(child)
	parent.AddChild(etree.NewText("\n" + indent))
}

// lineIndent returns the indentation of an element that starts a line: the
// blanks after the last newline of the whitespace right before it. ok is
// false when the element does not start a line.
func lineIndent(el *etree.Element) (indent string, ok bool) {
	parent := el.Parent()
	if parent == nil {
		return "", false
	}
	i := el.Index()
	if i == 0 {
		// The first token of the document (the root without a prolog) starts a line.
		return "", parent.Parent() == nil
	}
	if !isBlank(parent.Child[i-1]) {
		return "", false
	}
	data := parent.Child[i-1].(*etree.CharData).Data
	nl := strings.LastIndexByte(data, '\n')
	if nl < 0 {
		return "", false
	}
	return data[nl+1:], true
}

// indentStep is the indentation one level below el, whose own indentation is
// indent: the difference between el's and its parent's indentation when el is
// deeper, otherwise a tab (KubeVirt's MarshalIndent unit).
func indentStep(el *etree.Element, indent string) string {
	if parent := el.Parent(); parent != nil {
		if outer, ok := lineIndent(parent); ok && len(indent) > len(outer) && strings.HasPrefix(indent, outer) {
			return indent[len(outer):]
		}
	}
	return "\t"
}

// isBlank reports whether t is character data made only of whitespace.
func isBlank(t etree.Token) bool {
	cd, ok := t.(*etree.CharData)
	return ok && !cd.IsCData() && strings.TrimSpace(cd.Data) == ""
}

// addIndented is appendChild returning child.
func addIndented(parent, child *etree.Element) *etree.Element {
	appendChild(parent, child)
	return child
}

// insertIndented inserts child at index at of parent's tokens; when the
// element before it starts a line, child gets a line with the same
// indentation.
func insertIndented(parent, child *etree.Element, at int) {
	if at > 0 && at <= len(parent.Child) {
		if prev, ok := parent.Child[at-1].(*etree.Element); ok {
			if indent, ok := lineIndent(prev); ok {
				parent.InsertChildAt(at, etree.NewText("\n"+indent))
				at++
			}
		}
	}
	parent.InsertChildAt(at, child)
}

// removeIndented removes child and the blank text that puts it on its line.
func removeIndented(parent, child *etree.Element) {
	i := child.Index()
	parent.RemoveChildAt(i)
	if i > 0 && isBlank(parent.Child[i-1]) {
		parent.RemoveChildAt(i - 1)
	}
}

package state

// OpenLocked opens the store under dir (New) and takes its node lock:
// shared for ADD, CHECK and DEL, exclusive (exclusive true) for GC. The
// caller must unlock it.
func OpenLocked(dir string, exclusive bool) (*Store, *Lock, error) {
	store, err := New(dir)
	if err != nil {
		return nil, nil, err
	}
	lock, err := store.Lock(exclusive)
	if err != nil {
		return nil, nil, err
	}
	return store, lock, nil
}

// AttachmentLocks are what an ADD or DEL of one attachment holds while it
// runs: the store, its node lock (shared) and the attachment's lock.
type AttachmentLocks struct {
	Store            *Store
	Node, Attachment *Lock
}

// LockAttachment opens the store under dir and takes the node lock
// (shared) and then the lock of the attachment containerID/ifName, in the
// order Store.LockAttachment requires. The caller must Unlock them.
func LockAttachment(dir, containerID, ifName string) (*AttachmentLocks, error) {
	store, node, err := OpenLocked(dir, false)
	if err != nil {
		return nil, err
	}
	att, err := store.LockAttachment(containerID, ifName)
	if err != nil {
		node.Unlock()
		return nil, err
	}
	return &AttachmentLocks{Store: store, Node: node, Attachment: att}, nil
}

// Unlock releases the attachment's lock, then the node lock.
func (l *AttachmentLocks) Unlock() {
	l.Attachment.Unlock()
	l.Node.Unlock()
}

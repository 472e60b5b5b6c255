package v1alpha1

import "strconv"

// VSOCKAddress formats what a guest dials, "<cid>:<port>", as
// VSOCKServiceStatus.Address holds it.
func VSOCKAddress(cid, port int64) string {
	return strconv.FormatInt(cid, 10) + ":" + strconv.FormatInt(port, 10)
}

// Dial is the vsock address a selected guest dials to reach the service s:
// in mode Sibling the target's CID in the group at the service's port, in
// mode Relay the host (HostCID) at the relay port. ok is false while that is
// not yet known (no target CID, no relay port). The operator writes
// s.Address from it and the benchmark runner dials it.
func (s VSOCKServiceStatus) Dial() (cid, port int64, ok bool) {
	if s.Mode == VSOCKModeSibling {
		if s.TargetCID == nil {
			return 0, 0, false
		}
		return *s.TargetCID, s.Port, true
	}
	if s.RelayPort <= 0 {
		return 0, 0, false
	}
	return HostCID, s.RelayPort, true
}

// DialAddress is Dial as Address holds it, "<cid>:<port>"; empty while the
// address is not yet known.
func (s VSOCKServiceStatus) DialAddress() string {
	cid, port, ok := s.Dial()
	if !ok {
		return ""
	}
	return VSOCKAddress(cid, port)
}

package guests

import osexec "os/exec"

func execCmd(argv ...string) (string, error) {
	out, err := osexec.Command(argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}

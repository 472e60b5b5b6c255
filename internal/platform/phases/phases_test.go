package phases

import (
	"context"
	"errors"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

type scope struct {
	ran  []string
	stop bool
}

func (s *scope) Stopped() bool { return s.stop }

func step(name string, res ctrl.Result, err error, stop bool) Phase[*scope] {
	return func(_ context.Context, s *scope) (ctrl.Result, error) {
		s.ran = append(s.ran, name)
		s.stop = stop
		return res, err
	}
}

func TestRun(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		phases  []Phase[*scope]
		wantRan string
		want    time.Duration
		wantErr error
	}{
		{"all run, soonest requeue wins", []Phase[*scope]{
			step("a", ctrl.Result{RequeueAfter: time.Minute}, nil, false),
			step("b", ctrl.Result{}, nil, false),
			step("c", ctrl.Result{RequeueAfter: time.Second}, nil, false),
		}, "abc", time.Second, nil},
		{"an error ends the run and drops requeues", []Phase[*scope]{
			step("a", ctrl.Result{RequeueAfter: time.Minute}, nil, false),
			step("b", ctrl.Result{}, boom, false),
			step("c", ctrl.Result{}, nil, false),
		}, "ab", 0, boom},
		{"stop ends the run without an error, keeping its requeue", []Phase[*scope]{
			step("a", ctrl.Result{}, nil, false),
			step("b", ctrl.Result{RequeueAfter: 3 * time.Second}, nil, true),
			step("c", ctrl.Result{RequeueAfter: time.Second}, nil, false),
		}, "ab", 3 * time.Second, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{}
			res, err := Run(context.Background(), s, tc.phases...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := ""; true {
				for _, r := range s.ran {
					got += r
				}
				if got != tc.wantRan {
					t.Errorf("ran %q, want %q", got, tc.wantRan)
				}
			}
			if res.RequeueAfter != tc.want {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.want)
			}
		})
	}
}

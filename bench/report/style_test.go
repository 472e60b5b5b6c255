package report

import (
	"strconv"
	"strings"
	"testing"

	"github.com/onsi/gomega"
)

// decimals counts the digits after the point of a decimal string.
func decimals(s string) int {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// Steps that are not exact binary fractions (0.2, 0.05) once added up or
// multiplied printed as 0.6000000000000001 on an axis (issue 44).
func TestNiceTicksLabelsHaveTheStepsDecimals(t *testing.T) {
	for _, tc := range []struct {
		min, max float64
		step     string
	}{
		{0, 1, "0.2"},
		{0, 0.3, "0.05"},
		{0, 45, "10"},
		{0.76, 0.97, "0.05"},
		{0, 14, "2.5"},
	} {
		t.Run(strconv.FormatFloat(tc.min, 'g', -1, 64)+"-"+strconv.FormatFloat(tc.max, 'g', -1, 64), func(t *testing.T) {
			g := gomega.NewWithT(t)
			step, err := strconv.ParseFloat(tc.step, 64)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			ticks := niceTicks(tc.min, tc.max)
			g.Expect(len(ticks)).To(gomega.BeNumerically(">=", 2))
			seen := map[string]bool{}
			for i, tk := range ticks {
				g.Expect(decimals(tk.Label)).To(gomega.BeNumerically("<=", decimals(tc.step)), "label %q of step %s", tk.Label, tc.step)
				g.Expect(seen[tk.Label]).To(gomega.BeFalse(), "label %q twice", tk.Label)
				g.Expect(tk.Label).NotTo(gomega.MatchRegexp(`^-0(\.0*)?$`), "zero is not negative")
				seen[tk.Label] = true
				v, err := strconv.ParseFloat(tk.Label, 64)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(tk.Value).To(gomega.Equal(v), "the tick sits where its label says")
				g.Expect(tk.Value).To(gomega.BeNumerically(">=", tc.min))
				g.Expect(tk.Value).To(gomega.BeNumerically("<=", tc.max))
				if i > 0 {
					g.Expect(tk.Value - ticks[i-1].Value).To(gomega.BeNumerically("~", step, step*1e-9))
				}
			}
			g.Expect(ticks[0].Value).To(gomega.BeNumerically("<", tc.min+step))
			g.Expect(ticks[len(ticks)-1].Value).To(gomega.BeNumerically(">", tc.max-step))
		})
	}
}

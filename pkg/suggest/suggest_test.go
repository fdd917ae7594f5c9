package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"mpi-openmpi", "mpi-openmpi-gpu", "mpi-mpich", "mpi-deepspeed"}
	cases := map[string]struct {
		name string
		want string
	}{
		"typo":             {name: "mpi-opnempi", want: "mpi-openmpi"},
		"case":             {name: "MPI-MPICH", want: "mpi-mpich"},
		"missing suffix":   {name: "mpi-openmpi-gp", want: "mpi-openmpi-gpu"},
		"nothing close":    {name: "tensorflow", want: ""},
		"no candidates":    {name: "x"},
		"exact is closest": {name: "mpi-deepspeed", want: "mpi-deepspeed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := known
			if name == "no candidates" {
				c = nil
			}
			if got := Closest(tc.name, c); got != tc.want {
				t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

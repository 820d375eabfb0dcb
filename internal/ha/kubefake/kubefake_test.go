package kubefake_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/weirstream/weir/internal/ha/kubefake"
)

// staleUpdate updates a ConfigMap twice from the same read and returns
// the second update's error.
func staleUpdate(t *testing.T, cli kubernetes.Interface) error {
	t.Helper()
	ctx := context.Background()
	cms := cli.CoreV1().ConfigMaps("ns")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := cms.Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := a.DeepCopy()
	a.Data = map[string]string{"k": "a"}
	if _, err := cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Data = map[string]string{"k": "b"}
	_, err = cms.Update(ctx, b, metav1.UpdateOptions{})
	return err
}

// client-go's own fake accepts an update based on a stale read, which the
// API server refuses: the reason this package exists. kubefake refuses it
// with 409 Conflict and keeps the first write.
func TestStaleUpdateConflicts(t *testing.T) {
	if err := staleUpdate(t, fake.NewClientset()); err != nil {
		t.Logf("client-go's fake now refuses a stale update (%v): kubefake's reactors may be dropped", err)
	}
	cli := kubefake.New()
	if err := staleUpdate(t, cli); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
	cm, err := cli.CoreV1().ConfigMaps("ns").Get(context.Background(), "c", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "a" || cm.ResourceVersion == "" {
		t.Fatalf("after the conflict: %+v, %v; want the first write with a resourceVersion", cm, err)
	}
	if _, err := cli.CoreV1().ConfigMaps("ns").Create(context.Background(), cm, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
}

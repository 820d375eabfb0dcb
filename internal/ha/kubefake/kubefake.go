// Package kubefake is an in-memory Kubernetes API for tests of the
// Kubernetes high availability services: client-go's fake clientset, with
// the optimistic concurrency the real API server has and the fake lacks.
//
// client-go's object tracker stores objects as given and accepts any
// update: it neither sets metadata.resourceVersion nor refuses an update
// whose resourceVersion is stale. New adds reactors that do both, as the
// API server does: every create and update stamps the object with a new
// resourceVersion, and an update (or a delete with a resourceVersion
// precondition) that names another resourceVersion than the stored one
// fails with 409 Conflict.
package kubefake

import (
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// New returns a fake clientset that enforces resourceVersions; its
// Actions are the calls made, as with client-go's.
func New() *fake.Clientset {
	cs := fake.NewClientset()
	tracker := cs.Tracker()
	var mu sync.Mutex
	var rv int64
	next := func(obj runtime.Object) (runtime.Object, error) {
		obj = obj.DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		rv++
		m.SetResourceVersion(strconv.FormatInt(rv, 10))
		return obj, nil
	}
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateAction)
		mu.Lock()
		defer mu.Unlock()
		obj, err := next(c.GetObject())
		if err != nil {
			return true, nil, err
		}
		if m, _ := meta.Accessor(obj); m.GetName() == "" {
			return false, nil, nil // generateName: left to the tracker
		}
		if err := tracker.Create(c.GetResource(), obj, c.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	cs.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		if u.GetSubresource() != "" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		m, err := meta.Accessor(u.GetObject())
		if err != nil {
			return true, nil, err
		}
		cur, err := tracker.Get(u.GetResource(), u.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		cm, _ := meta.Accessor(cur)
		if m.GetResourceVersion() != "" && m.GetResourceVersion() != cm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(u.GetResource().GroupResource(), m.GetName(),
				errStale{want: m.GetResourceVersion(), have: cm.GetResourceVersion()})
		}
		obj, err := next(u.GetObject())
		if err != nil {
			return true, nil, err
		}
		if err := tracker.Update(u.GetResource(), obj, u.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	cs.PrependReactor("delete", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		mu.Lock()
		defer mu.Unlock()
		if p := d.GetDeleteOptions().Preconditions; p != nil && p.ResourceVersion != nil {
			cur, err := tracker.Get(d.GetResource(), d.GetNamespace(), d.GetName())
			if err != nil {
				return true, nil, err
			}
			if cm, _ := meta.Accessor(cur); cm.GetResourceVersion() != *p.ResourceVersion {
				return true, nil, apierrors.NewConflict(d.GetResource().GroupResource(), d.GetName(),
					errStale{want: *p.ResourceVersion, have: cm.GetResourceVersion()})
			}
		}
		return true, nil, tracker.Delete(d.GetResource(), d.GetNamespace(), d.GetName())
	})
	return cs
}

type errStale struct{ want, have string }

func (e errStale) Error() string {
	return "the object has been modified: resourceVersion " + e.want + " is not the stored " + e.have
}

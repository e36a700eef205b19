/* Precomputed explorers of the HTML edition (utils/htmlbook/explorers.py): swap the figure as a
   control moves. Each .course-explorer holds its grid as JSON: the controls' values, and for every
   combination (row-major) [image, captions, effective control values or null, disabled controls].
   A slider's track runs over the indices of its grid values (utils/widgets/grid.py), so it stops only
   at rendered values. No network, no dependencies. */
(function () {
  "use strict";

  function nearest(positions, x) {
    var best = 0;
    for (var i = 1; i < positions.length; i++) {
      if (Math.abs(positions[i] - x) < Math.abs(positions[best] - x)) best = i;
    }
    return best;
  }

  function setup(root) {
    var grid = JSON.parse(root.querySelector("script.explorer-grid").textContent);
    var figure = root.querySelector("img.explorer-figure");
    var captions = root.querySelectorAll(".explorer-caption");
    var controls = grid.controls.map(function (control, i) {
      return { spec: control, inputs: root.querySelectorAll('[data-control="' + i + '"]') };
    });
    var index = controls.map(function () { return 0; });
    var state = +root.dataset.initialState;
    for (var c = controls.length - 1, rest = state; c >= 0; c--) {
      index[c] = rest % controls[c].spec.values.length;
      rest = Math.floor(rest / controls[c].spec.values.length);
    }

    function read(control) {
      var spec = control.spec, input = control.inputs[0];
      if (spec.kind === "slider") return nearest(spec.positions, input.valueAsNumber);
      if (spec.kind === "check") return spec.values.indexOf(input.checked);
      if (spec.kind === "buttons") {
        for (var i = 0; i < control.inputs.length; i++) if (control.inputs[i].checked) return +control.inputs[i].value;
      }
      return +input.value;
    }

    function write(control, i) {
      var spec = control.spec, input = control.inputs[0];
      if (spec.kind === "slider") {
        input.value = spec.positions[i];
        input.parentNode.querySelector("output").textContent = spec.labels[i];
      } else if (spec.kind === "check") {
        input.checked = spec.values[i] === true;
      } else if (spec.kind === "buttons") {
        control.inputs.forEach(function (radio) { radio.checked = +radio.value === i; });
      } else {
        input.value = String(i);
      }
    }

    function show() {
      var at = 0;
      controls.forEach(function (control, c) { at = at * control.spec.values.length + index[c]; });
      var entry = grid.states[at];
      if (entry[2]) { index = entry[2].slice(); }  // a value the wiring clamps (a head past H)
      controls.forEach(function (control, c) {
        write(control, index[c]);
        control.inputs.forEach(function (input) { input.disabled = entry[3].indexOf(c) >= 0; });
      });
      figure.src = grid.images[entry[0]];
      figure.dataset.state = String(at);
      grid.captions[entry[1]].forEach(function (text, i) { if (captions[i]) captions[i].innerHTML = text; });
    }

    controls.forEach(function (control, c) {
      control.inputs.forEach(function (input) {
        input.addEventListener(control.spec.kind === "slider" ? "input" : "change", function () {
          index[c] = read(control);
          show();
        });
      });
    });
    show();
    root.dataset.ready = "true";
  }

  function start() {
    document.querySelectorAll(".course-explorer").forEach(setup);
    // the page is open: text, figures and every explorer answering (tests/test_html.py times this)
    if (window.performance && performance.mark) performance.mark("course-explorers-ready");
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

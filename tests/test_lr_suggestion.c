/* volt_lr_find_suggestion: Lightning 2.6's lr_finder.suggestion — the least gradient of the
 * smoothed loss with respect to the learning rate (torch.gradient with the rates as
 * coordinates), over the finite points between the skips. The expected values below were
 * worked by hand with numpy.gradient's coefficients for uneven spacing; the older rule (the
 * gradient over the point index) picks other rates in both cases. */
#include <math.h>
#include <stdio.h>
#include "vtest.h"
#include "volt/trainer.h"

static double sugg(double *lrs, double *losses, int64_t n, int64_t a, int64_t b) {
    const volt_lr_find_result r = { .n = n, .lrs = lrs, .losses = losses };
    return volt_lr_find_suggestion(&r, a, b);
}

int main(void) {
    /* uneven spacing: gradients -1, -4/3, -11/8, -1/48, 3/16 -> the third point (lr 4); over the
     * index the second (lr 2) would win (-2.5) */
    double x1[] = { 1, 2, 4, 8, 16 }, f1[] = { 10, 9, 5, 4.5, 6 };
    double s = sugg(x1, f1, 5, 0, 0);
    CHECK(s == 4, "uneven spacing: suggestion %g (want 4)", s);
    /* skip_begin 1, skip_end 1 leave lr 2, 4, 8: gradients -2 (one-sided), -11/8, -1/8 -> lr 2 */
    s = sugg(x1, f1, 5, 1, 1);
    CHECK(s == 2, "skips 1, 1: suggestion %g (want 2)", s);
    /* non-finite losses leave the sweep: (1,5) (3,4) (4,1) (6,0.5): -0.5, -13/6, -25/12, -0.25 ->
     * lr 3 (over the index of the finite points: lr 4) */
    double x2[] = { 1, 2, 3, 4, 5, 6 }, f2[] = { 5, NAN, 4, 1, INFINITY, 0.5 };
    s = sugg(x2, f2, 6, 0, 0);
    CHECK(s == 3, "non-finite losses dropped: suggestion %g (want 3)", s);
    /* two points: one-sided both */
    double x3[] = { 1, 10 }, f3[] = { 2, 1 };
    s = sugg(x3, f3, 2, 0, 0);
    CHECK(s == 1, "two points: the first of equal gradients: %g", s);
    /* fewer than 2 finite points, Lightning's default skips on a short sweep, bad arguments: NAN */
    double f4[] = { NAN, 1, INFINITY, NAN, 2, 3 };
    CHECK(isnan(sugg(x2, f4, 6, 2, 1)), "one finite point: NAN");
    CHECK(!isnan(sugg(x2, f4, 6, 0, 0)), "three finite points: a suggestion");
    double x5[12], f5[12];
    for (int i = 0; i < 12; i++) { x5[i] = i + 1; f5[i] = 12 - i; }
    CHECK(isnan(sugg(x5, f5, 12, 10, 1)), "10 and 1 skipped of 12: one point left, NAN");
    CHECK(sugg(x5, f5, 12, 9, 1) == 10, "10 and 1 skipped of 12... 9 and 1: two left, the first: %g", sugg(x5, f5, 12, 9, 1));
    CHECK(isnan(sugg(x5, f5, 12, -1, 1)) && isnan(sugg(x5, f5, 12, 0, -1)) && isnan(volt_lr_find_suggestion(NULL, 0, 0)),
          "negative skips, NULL: NAN");
    return vtest_finish();
}
